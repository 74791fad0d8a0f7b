"""The offline demo, beside the engine: a provider whose models need no key and no network, the demo web, and the
data ``load_demo`` loads.

- :mod:`.model` — the demo model (plain Python over the engine's types, no Django), as deterministic and honest
  about what it is as the engine's tests need;
- :mod:`.web` — the demo web: fictional pages searched and read offline (no Django either);
- :mod:`.provider` — the demo provider and the demo web as the apps see them: ``apps.DemoConfig.ready`` registers
  them in the catalogue's provider registry and as the offline web, so no other app imports this package;
- :mod:`.views` — a page of the demo web, opened from a source; ``management/commands/load_demo.py`` and
  :mod:`.management.demo_features` — the demo organisation, its documents (``data/``) and what shows each feature.
"""
