#!/usr/bin/env bash
# Make a Linux user the course's teacher on the hub: run as root after tools/hub/setup.sh.
#   sudo tools/hub/teacher.sh <user> [course folder, default ~<user>/attention-course]
# Idempotent. It makes the user's home and the course folder private (mode 700), writes the
# nbgrader course folder from the shared copy of the course (as that user, so they own it; a
# rerun rewrites only source/), points the teacher's nbgrader at it (CourseDirectory.root, which
# the Formgrader's own tab at /user/<user>/formgrader needs), and turns the Formgrader and
# Create Assignment on for this user alone. Restart the user's server afterwards.
set -euo pipefail
PREFIX="${COURSE_PREFIX:-/opt/attention-course}"
VENV="$PREFIX/venv"
who="${1:?usage: teacher.sh <user> [course folder]}"
home="$(getent passwd "$who" | cut -d: -f6)"
[ -n "$home" ] && [ -d "$home" ] || { echo "teacher.sh: no user $who with a home" >&2; exit 1; }
course="${2:-$home/attention-course}"
[ "$(id -u)" = 0 ] || { echo "teacher.sh: run as root" >&2; exit 1; }

as_teacher() {  # a command as the teacher, with the shared environment first on PATH
  runuser -u "$who" -- env -i HOME="$home" USER="$who" LOGNAME="$who" \
    PATH="$VENV/bin:/usr/local/bin:/usr/bin:/bin" "$@"
}

cd "$home"  # a folder the teacher may read: commands run as the teacher start there
chmod 700 "$home"
as_teacher mkdir -p "$course"
chmod 700 "$course"
(cd "$PREFIX/course" && as_teacher python -B -m tools.nbgrader_course "$course")
as_teacher mkdir -p "$home/.jupyter"
as_teacher tee "$home/.jupyter/nbgrader_config.py" >/dev/null <<EOF
# Written by tools/hub/teacher.sh: the course folder, for the Formgrader and every nbgrader command.
c = get_config()  # noqa: F821
c.CourseDirectory.root = "$course"
EOF
as_teacher jupyter labextension enable --level=user @jupyter/nbgrader:formgrader >/dev/null
as_teacher jupyter labextension enable --level=user @jupyter/nbgrader:create-assignment >/dev/null
# `jupyter server extension enable --user` refuses an extension that only the environment's
# config declares ("could not be found"), so the teacher's server config says it directly.
as_teacher python - <<'PY'
import json, pathlib
path = pathlib.Path.home() / ".jupyter" / "jupyter_server_config.json"
config = json.loads(path.read_text()) if path.is_file() else {}
found = config.setdefault("ServerApp", {}).setdefault("jpserver_extensions", {})
found["nbgrader.server_extensions.formgrader"] = True
path.write_text(json.dumps(config, indent=2) + "\n")
PY
echo "teacher.sh: $who teaches from $course (mode 700)"
