"""Before the first request: load the embedding model and take what is loaded out of the garbage collector's sight.

Why: a full (generation 2) collection walks every tracked object, and a process that imported torch and
transformers and loaded a model holds ~500k of them. Under the HTTP load benchmark such a collection came every
~13 s and stopped every request thread for 130-400 ms: it was the largest of the p99 latencies once flushes were
spread out (docs/benchmarks.md). ``gc.freeze()`` moves the objects alive at start-up into a permanent generation that
collections skip; what requests allocate afterwards is collected as before. Loading the model here also takes its
~5 s out of the first request, and ``/readyz`` turns ready only after it. The language identifier of the text layer
(``text.warm_up``) is loaded here too: the first write or question in German, Spanish, French, Italian, Portuguese
or Dutch would otherwise wait ~0.6-1.4 s for it (seen as the one slow turn of ``benchmarks.perf.turns``).
"""

from __future__ import annotations

import gc
import logging
import time

from graphrecall import text
from graphrecall.embed.base import Embedder

log = logging.getLogger(__name__)


def warm_up(embedder: Embedder) -> None:
    t0 = time.perf_counter()
    log.info("loading the embedding model before accepting requests ...")
    embedder.embed(["warm up"], kind="query")
    text.warm_up()
    gc.collect()
    gc.freeze()
    log.info(
        "embedder and language identifier loaded and %d start-up objects frozen out of garbage collection in %.1f s",
        gc.get_freeze_count(),
        time.perf_counter() - t0,
    )
