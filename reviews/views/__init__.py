"""Review UI views, one module per screen."""
