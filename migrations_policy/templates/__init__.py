"""The alembic environment templates (``migrations-policy init --template NAME``).

Their source is the top-level ``alembic_templates/`` directory of the
repository; setup.cfg maps it onto this package (``package_dir``), so an
installed migrations_policy carries them here.  A source checkout reads them
from ``alembic_templates/`` directly (``authoring.scaffold.template_root``).
"""
