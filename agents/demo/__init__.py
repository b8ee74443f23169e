"""The demo workspace's scripted sessions, replayed through the agent API by
``manage.py cairn_demo``."""
