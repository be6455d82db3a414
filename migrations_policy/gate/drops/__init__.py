"""What a revision may destroy: the drop guard (``drop_guard``) and its raw-driver paths
(``raw_paths``), data nothing moved (``data_drops``), the downgrade's at-risk judgement
(``at_risk``, with ``routines`` for statements that run unseen code), and the live sync
triggers of the rolling window (``sync_trigger_checks``)."""
