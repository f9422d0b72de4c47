"""``stateflow ui``: a local web app over results directories and archive files.

* :mod:`.index`: the data layer (byte offsets per record, traces read on demand, live files),
  reading lines with :mod:`.lines`; :mod:`.summary`: the overview's persisted sums of
  :mod:`.figures` (a first page reads them instead of the records);
* :mod:`.overview`, :mod:`.task_query`, :mod:`.steps`, :mod:`.graph`: what each page shows;
* :mod:`.live`: the live page's feed (the runner's side files of episodes in flight, as
  server-sent events); :mod:`.whatif_jobs`: replays started from an episode page;
* :mod:`.app`: the pages (request in, response out), :mod:`.server`: HTTP on 127.0.0.1.

The templates (``templates/``) and assets (``static/``) are shared with the one-file report
(``stateflow report``), so the two show the same things the same way.
"""

from __future__ import annotations

__all__: list[str] = []
