"""A run's life: intake (the request check), launch, execution, the recorder, leases, channel-layer group
names and the follower that both the live page and the API read a run through.

It executes wherever a run executes: the web server's event loop in the embedded default, a Celery
worker when scaled out (``workers`` holds only the Celery glue).
"""
