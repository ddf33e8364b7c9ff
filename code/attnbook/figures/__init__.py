"""The lessons' figures: one module per lesson topic, each function drawing onto a given figure.

Every function has the signature ``draw_something(fig, **values)`` so that it can be handed to
:func:`attnbook.widgets.slider_panel` or called once for a static figure.
"""
