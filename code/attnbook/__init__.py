"""attnbook: the book machinery of *From KV Cache to KDA*, a client of the maths package
``attnlab``.

Plotting and the figure standard (``plotting``), one figure module per lesson (``figures``), slider
panels live and pre-rendered (``widgets``, ``panel_page``), the notebook glue helpers
(``notebook``), the lessons' demos and experiments (``demos``, ``recall_study``,
``learned_head``, ``decode_cost``), and timing (``timing``). It imports ``attnlab``; ``attnlab``
never imports it.

Importing it caps torch's thread count at the container's CPU quota, where there is one (see
``_threads``): on Binder, torch would otherwise start a thread for every core of the host.
"""

from ._threads import limit_threads_to_cpu_quota

limit_threads_to_cpu_quota()
