"""Rolling-upgrade rehearsal: release-N code keeps running while release N+1's expand, online data
migrations and contract run, on a scratch database; every error either release's code saw is reported.

* ``rehearse(project, old_models, new_models, from_revision, ...)`` -> ``RehearsalResult``;
* ``schema_problems(connection, models)``: the static check of one release's models against a schema;
* ``migrations_policy.testing.rehearsal``: the same for a project's own pytest suite;
* ``migrations-policy rehearse``: the command.
"""

from migrations_policy.rehearsal.compatibility import schema_problems, type_problem
from migrations_policy.rehearsal.models import Models, load_models
from migrations_policy.rehearsal.result import EXIT_CLEAN, EXIT_ERRORS, PhaseReport, RehearsalResult
from migrations_policy.rehearsal.run import RehearsalOptions, rehearse, require_scratch_database
from migrations_policy.rehearsal.workload import Observed, Workload

__all__ = ["rehearse", "RehearsalOptions", "RehearsalResult", "PhaseReport", "EXIT_CLEAN", "EXIT_ERRORS",
           "schema_problems", "type_problem", "Models", "load_models", "require_scratch_database",
           "Observed", "Workload"]
