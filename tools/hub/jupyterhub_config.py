"""JupyterHub for the course "Attention, Head by Head" on one Linux server (TEACHING.md, "Running
a graded class"). ``tools/hub/setup.sh`` copies it to /opt/attention-course/hub/, where
``make hub`` starts it as root:

    cd /opt/attention-course/hub && /opt/attention-course/venv/bin/jupyterhub -f jupyterhub_config.py

Each user's server runs as that Linux user (JupyterHub's local spawner), from the shared
environment, with the user's home made private (mode 700) before it starts. The class is read from
the environment, or edit the two lines below: ``COURSE_TEACHER`` (one user name) and
``COURSE_STUDENTS`` (names separated by commas); every one must be a Linux user with a home.

Logging in uses the server's own passwords (PAM, JupyterHub's default); for a university login,
set ``c.JupyterHub.authenticator_class`` (OAuthenticator, LDAP) as its documentation says. With
``COURSE_HUB_TOKEN`` set, a service of that token may start servers and reach them (what
``tests/test_hub.py`` uses); leave it unset on a real server.
"""

import os
import stat
from pathlib import Path

c = get_config()  # noqa: F821 (JupyterHub's config loader provides it)

PREFIX = Path(os.environ.get("COURSE_PREFIX", "/opt/attention-course"))
VENV = PREFIX / "venv"
TEACHER = os.environ.get("COURSE_TEACHER", "teacher")
STUDENTS = [s for s in os.environ.get("COURSE_STUDENTS", "").split(",") if s]

# Only this machine reaches the hub; put a reverse proxy with TLS (nginx, Caddy) in front of it
# for a class, or set ip to "" to listen on every address behind a firewall that allows TLS only.
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = int(os.environ.get("COURSE_HUB_PORT", "8000"))
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(os.environ.get("COURSE_HUB_API_PORT", "8081"))
c.ConfigurableHTTPProxy.command = [str(VENV / "bin" / "configurable-http-proxy")]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{c.JupyterHub.port + 1}"

# The hub's secrets and database, in a folder only root reads.
STATE = Path(os.environ.get("COURSE_HUB_STATE", PREFIX / "hub"))
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.ConfigurableHTTPProxy.pid_file = str(STATE / "jupyterhub-proxy.pid")

c.Authenticator.allowed_users = {TEACHER, *STUDENTS}
c.Authenticator.admin_users = {TEACHER}

# Every server runs the shared environment's Jupyter, with its programs first on PATH (nbgrader,
# python, jupyter), and opens JupyterLab in the user's home.
c.Spawner.cmd = [str(VENV / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.environment = {
    "PATH": f"{VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin",
    "COURSE_DEVICE": "cpu",  # a lab server without GPUs; remove it on one with a GPU
}
# A kernel holds 0.3-0.5 GB once a lesson has run (TEACHING.md, "A class of 30"): one idle for
# an hour, with no browser tab open on it, is shut down.
c.Spawner.args = ["--MappingKernelManager.cull_idle_timeout=3600"]
c.Spawner.http_timeout = 120  # seconds: a first start on a busy server imports a lot
c.Spawner.start_timeout = 120


def private_home(spawner):
    """Before a server starts: its user's home readable by that user alone (mode 700), so no
    student reads the teacher's course folder (solutions, gradebook) or another student's work."""
    import pwd

    home = Path(pwd.getpwnam(spawner.user.name).pw_dir)
    if home.is_dir() and stat.S_IMODE(home.stat().st_mode) != 0o700:
        home.chmod(0o700)


c.Spawner.pre_spawn_hook = private_home

# A service that may start users' servers and reach them: only when a token is given.
if os.environ.get("COURSE_HUB_TOKEN"):
    c.JupyterHub.services = [{"name": "course-admin", "api_token": os.environ["COURSE_HUB_TOKEN"]}]
    c.JupyterHub.load_roles = [
        {
            "name": "course-admin",
            "scopes": ["admin:users", "admin:servers", "access:servers", "read:users"],
            "services": ["course-admin"],
        }
    ]
