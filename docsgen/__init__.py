"""Builds the generated parts of the docs site (``make docs``): the API reference from
the OpenAPI schema, the configuration table from cairn/settings.py and tuning.py, the management
commands from their ``--help``, and the current benchmark results."""
