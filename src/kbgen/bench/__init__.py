"""`kbgen bench`: run an experiment spec against a real LLM server and keep every raw sample.

The spec and its prompt suite, the launchers that start or reach the server per variant, the
streaming client that times each request, the `/metrics` counters around each window, and the run
folder that keeps it all as it happens (`runs/<run-id>/`). Above `kb`, below `record`.
"""
