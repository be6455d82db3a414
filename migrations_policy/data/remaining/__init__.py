"""What remains of each data migration, for the gate, ``status`` and the runner: the pending
rows (``pending``), a completion proven once and remembered while nothing can change it
(``completion``), and row estimates that read no rows (``estimate``)."""
