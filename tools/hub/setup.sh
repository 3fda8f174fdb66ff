#!/usr/bin/env bash
# The course's JupyterHub on one Linux server: run as root from a clone of the course.
#   sudo tools/hub/setup.sh            (what `make hub` runs before starting the hub)
# Idempotent: a second run reinstalls only the course and rewrites the configs.
#
# It builds, outside every home folder (students cannot run anything under /root or a home):
#   $PREFIX/venv      the course's environment, made with the system's Python: requirements.txt,
#                     the course's helpers, nbgrader and JupyterHub; root-owned, read-only to users
#   $PREFIX/course    a copy of the course (notebooks, helpers, tools) the teacher builds from
#   $PREFIX/proxy     configurable-http-proxy from npm
#   $PREFIX/hub       the hub's state (cookie secret, database), mode 700
#   $EXCHANGE         nbgrader's exchange, writable by all, sticky (no one removes others' files)
#   /etc/jupyter/nbgrader_config.py   the exchange and course id every user's nbgrader reads
# and turns nbgrader's Formgrader and Create Assignment off for everyone (tools/hub/teacher.sh
# turns them on for the teacher alone), as nbgrader's installation guide says.
set -euo pipefail
cd "$(dirname "$0")/../.."
PREFIX="${COURSE_PREFIX:-/opt/attention-course}"
EXCHANGE="${COURSE_EXCHANGE:-/srv/nbgrader/exchange}"
SYSTEM_PYTHON="${SYSTEM_PYTHON:-/usr/bin/python3}"
JUPYTERHUB_VERSION=6.1.1
PROXY_VERSION=5.3.0
COURSE_ID=attention-head-by-head

[ "$(id -u)" = 0 ] || { echo "setup.sh: run as root (it writes $PREFIX, $EXCHANGE, /etc/jupyter)" >&2; exit 1; }
command -v npm >/dev/null || { echo "setup.sh: needs npm (Node.js) for configurable-http-proxy" >&2; exit 1; }
umask 022
mkdir -p "$PREFIX"
chmod 755 "$PREFIX"

# 1. The environment, with the system's Python (a Python under /root is not runnable by users).
VENV="$PREFIX/venv"
[ -x "$VENV/bin/python" ] || "$SYSTEM_PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
STAMP="$VENV/.installed-$(cat requirements.txt requirements-classroom.txt | sha256sum | cut -c1-16)"
if [ ! -e "$STAMP" ]; then
  "${PIP[@]}" --upgrade pip
  "${PIP[@]}" -r requirements.txt
  "${PIP[@]}" -c requirements.txt -r requirements-classroom.txt "jupyterhub==$JUPYTERHUB_VERSION"
  touch "$STAMP"
fi

# 2. The course: a root-owned copy the teacher builds the nbgrader folder from, and its helpers
#    installed (not editable) so every kernel imports them.
rm -rf "$PREFIX/course.new"
mkdir -p "$PREFIX/course.new"
cp -r helpers tools notebooks pyproject.toml README.md LICENSE requirements*.txt "$PREFIX/course.new/"
find "$PREFIX/course.new" -name __pycache__ -prune -exec rm -rf {} +
rm -rf "$PREFIX/course" && mv "$PREFIX/course.new" "$PREFIX/course"
"${PIP[@]}" --no-deps --force-reinstall "$PREFIX/course"
"$VENV/bin/python" -m compileall -q "$PREFIX/course/helpers" "$PREFIX/course/tools" || true

# 3. The proxy between the hub and the users' servers.
if [ ! -x "$PREFIX/proxy/node_modules/.bin/configurable-http-proxy" ]; then
  npm install --silent --no-fund --no-audit --prefix "$PREFIX/proxy" \
    "configurable-http-proxy@$PROXY_VERSION"
fi
ln -sf "$PREFIX/proxy/node_modules/.bin/configurable-http-proxy" "$VENV/bin/configurable-http-proxy"

# 4. Students get the Assignment List and Validate, not the Formgrader or Create Assignment.
"$VENV/bin/jupyter" labextension disable --level=sys_prefix @jupyter/nbgrader:formgrader >/dev/null 2>&1
"$VENV/bin/jupyter" labextension disable --level=sys_prefix @jupyter/nbgrader:create-assignment >/dev/null 2>&1
"$VENV/bin/jupyter" server extension disable --sys-prefix nbgrader.server_extensions.formgrader >/dev/null 2>&1
# JupyterLab (4.1 and later) locks what the first `disable` finds disabled, and a locked plugin
# cannot be turned on again at the user level, the teacher's: unlock them. The Formgrader's
# server extension stays off, so a student who turns the panel on gets nothing from it; what
# keeps the teacher's files private is their permissions (tools/hub/teacher.sh), not this.
"$VENV/bin/jupyter" labextension unlock --level=sys_prefix \
  @jupyter/nbgrader:formgrader @jupyter/nbgrader:create-assignment >/dev/null 2>&1

# 5. nbgrader's exchange and the settings every user's nbgrader reads.
mkdir -p "$EXCHANGE"
chmod 1777 "$EXCHANGE"
mkdir -p /etc/jupyter
cat >/etc/jupyter/nbgrader_config.py <<EOF
# Written by tools/hub/setup.sh (the course "Attention, Head by Head"): read by every user's nbgrader.
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "$COURSE_ID"
c.Exchange.root = "$EXCHANGE"
EOF
chmod 644 /etc/jupyter/nbgrader_config.py

# 6. The hub's own state: only root reads it (the cookie secret, the database of tokens).
mkdir -p "$PREFIX/hub"
chmod 700 "$PREFIX/hub"
cp tools/hub/jupyterhub_config.py "$PREFIX/hub/jupyterhub_config.py"
chown -R root:root "$PREFIX"
chmod -R go-w "$PREFIX"
echo "setup.sh: $VENV ($("$VENV/bin/jupyterhub" --version | tail -1)), exchange $EXCHANGE"
