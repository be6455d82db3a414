"""The runner's walk over a data migration's pending rows: the run (``runner``) and how it is
driven (``drive``: worker threads, the ``--max-count`` budget, the round robin), where a walk
starts and ends (``survey``), the size of each batch (``sizing``), one locked transaction per
batch (``locks``), yielding to live traffic (``yielding``), several runners on one migration
(``claim_table``: the stored claims; ``claiming``: the batches walked inside them), and what a
run did (``report``)."""
