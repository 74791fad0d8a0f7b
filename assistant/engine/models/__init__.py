"""Model implementations behind the one ``Model`` interface."""
