# An alembic environment in the expand/contract layout (migrations_policy).

[alembic]
# path to migration scripts, relative to %(here)s (the directory of this file)
script_location = ${script_location}

# one directory per branch: expand (label "expand") and contract (label "contract")
version_locations = ${script_location}/versions/expand ${script_location}/versions/contract
path_separator = space

# prepended to sys.path, so that env.py can import your models (%(here)s: works from any directory)
prepend_sys_path = %(here)s

# template used to generate migration file names
# file_template = %%(year)d_%%(month).2d_%%(day).2d_%%(hour).2d%%(minute).2d-%%(rev)s_%%(slug)s

sqlalchemy.url = driver://user:pass@localhost/dbname

[migrations_policy]
# modules declaring online data migrations (generated stubs go to the first one)
# data_migrations = myapp.data_migrations
# release_mapping = myapp.releases:RELEASE_MAPPING

[post_write_hooks]

[loggers]
keys = root,sqlalchemy,alembic

[handlers]
keys = console

[formatters]
keys = generic

[logger_root]
level = WARNING
handlers = console
qualname =

[logger_sqlalchemy]
level = WARNING
handlers =
qualname = sqlalchemy.engine

[logger_alembic]
level = INFO
handlers =
qualname = alembic

[handler_console]
class = StreamHandler
args = (sys.stderr,)
level = NOTSET
formatter = generic

[formatter_generic]
format = %(levelname)-5.5s [%(name)s] %(message)s
datefmt = %H:%M:%S
