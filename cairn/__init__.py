import os

# Before anything imports numpy: one BLAS thread per process. The server's matrix
# products are small (a batch's 100x100 similarities) and run inside request threads
# of several worker processes; a BLAS thread pool on top oversubscribes the cores, and
# its workers busy-wait after each call, taking a core from PostgreSQL and the
# embedder (measured in bench/ingest_profile.py: 60-90 ms for one 100x384 product
# with two BLAS threads on a busy 2-core machine, 0.2 ms with one). The embedder
# sizes its own thread pool (CAIRN_EMBEDDING_THREADS). An operator's setting wins.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

from cairn.celery import app as celery_app  # noqa: E402

__all__ = ["celery_app"]
