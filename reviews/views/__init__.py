"""Review UI views, one module per screen. Function views; see reviews/htmx.py for
the page/fragment/action response shapes they share."""
