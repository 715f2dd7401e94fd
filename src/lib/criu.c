/*
 * criu.c: running criu(8).
 *
 * The command line is used rather than libcriu: criu swrk has no setter
 * for --leave-stopped, which the safety protocol rests on.
 */
#include "config.h"

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"

#define CRIU_ARGS	24

static const char	*criu_path(void);
static int		 criu_run(struct gck_ctx *, char *const [], const char *,
			    int, const char *, int (*)(void *, pid_t), void *,
			    int *);
static void		 criu_log_error(const char *, const char *, char *,
			    size_t);

static const char *
criu_path(void)
{
	static char	 found[PATH_MAX];
	const char	*env, *dirs[] = { "/usr/local/sbin", "/usr/sbin",
			    "/sbin", "/usr/local/bin", "/usr/bin", "/bin" };
	char		*path, *p, *save = NULL;
	size_t		 i;

	if ((env = getenv("GCK_CRIU")) != NULL && *env != '\0')
		return env;
	if ((env = getenv("PATH")) != NULL && (path = strdup(env)) != NULL) {
		for (p = strtok_r(path, ":", &save); p != NULL;
		    p = strtok_r(NULL, ":", &save)) {
			snprintf(found, sizeof found, "%s/criu", p);
			if (access(found, X_OK) == 0) {
				free(path);
				return found;
			}
		}
		free(path);
	}
	for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		snprintf(found, sizeof found, "%s/criu", dirs[i]);
		if (access(found, X_OK) == 0)
			return found;
	}
	return GCK_CRIU_PATH;
}

/*
 * Runs criu with argv, its output to outpath.  newsession puts it in a
 * session of its own (restore), otherwise in a process group of its own,
 * so that a terminal's ^C does not reach it: criu is never interrupted
 * half way, whatever happens to us.  While it runs, during(arg, pid)
 * serves its image streamer; should that fail, it has closed criu's
 * files, so that criu fails too.  Returns GCK_OK with *statusp set, the
 * code of during(), or a code when criu could not be started.
 */
static int
criu_run(struct gck_ctx *ctx, char *const argv[], const char *outpath,
    int newsession, const char *hook, int (*during)(void *, pid_t),
    void *arg, int *statusp)
{
	pid_t	pid;
	int	fd, status, oerrno, i, r = GCK_OK;

	pid = fork();
	if (pid == -1)
		return gck_set_syserr(ctx, errno, "cannot start criu: %s",
		    strerror(errno));
	if (pid == 0) {
		sigset_t	set;

		if (newsession)
			setsid();
		else
			setpgid(0, 0);
		if (hook != NULL)
			setenv("GCK_CRIU_HOOK", hook, 1);
		for (i = 1; i < NSIG; i++)
			signal(i, SIG_DFL);
		sigemptyset(&set);
		sigprocmask(SIG_SETMASK, &set, NULL);
		if ((fd = open("/dev/null", O_RDONLY)) != -1) {
			dup2(fd, 0);
			close(fd);
		}
		fd = open(outpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND,
		    0600);
		if (fd != -1) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(argv[0], argv);
		dprintf(2, "Error (gpuckpt): cannot run %s: %s\n", argv[0],
		    strerror(errno));
		_exit(127);
	}
	if (during != NULL)
		r = during(arg, pid);
	while (waitpid(pid, &status, 0) == -1) {
		if (errno != EINTR) {
			oerrno = errno;
			return gck_set_syserr(ctx, oerrno,
			    "cannot wait for criu: %s", strerror(oerrno));
		}
	}
	*statusp = status;
	return r;
}

/*
 * Finds the line of criu's log that says what went wrong: the first
 * "Error" line before the closing summary (what follows it is cleanup),
 * else the last line.
 */
static void
criu_log_error(const char *logpath, const char *outpath, char *buf,
    size_t len)
{
	const char	*paths[2] = { logpath, outpath };
	char		 line[1024], last[1024] = "", best[1024] = "", *s;
	FILE		*f;
	size_t		 i, l;

	for (i = 0; i < 2 && best[0] == '\0'; i++) {
		if ((f = fopen(paths[i], "re")) == NULL)
			continue;
		while (fgets(line, sizeof line, f) != NULL) {
			l = strlen(line);
			while (l > 0 && (line[l - 1] == '\n' ||
			    line[l - 1] == '.'))
				line[--l] = '\0';
			if (l == 0)
				continue;
			snprintf(last, sizeof last, "%s", line);
			if ((s = strstr(line, "Error (")) == NULL)
				continue;
			if (strstr(s, "FAILED") != NULL)
				break;
			if (best[0] != '\0' ||
			    strstr(s, "rlimit: Can't setup") != NULL)
				continue;
			if ((s = strstr(s, "): ")) != NULL)
				s += 3;
			else
				s = line;
			snprintf(best, sizeof best, "%s", s);
		}
		fclose(f);
	}
	snprintf(buf, len, "%s", best[0] != '\0' ? best :
	    last[0] != '\0' ? last : "no message");
}

/*
 * Writes criu's version ("4.1.1") into buf, using workdir for its output.  Returns GCK_OK or a code.
 */
int
gck_criu_version(struct gck_ctx *ctx, const char *workdir, char *buf,
    size_t len)
{
	char	 out[PATH_MAX], text[512], *s;
	char	*argv[3];
	int	 status, r;

	snprintf(out, sizeof out, "%s/criu-version.out", workdir);
	argv[0] = (char *)criu_path();
	argv[1] = "--version";
	argv[2] = NULL;
	if ((r = criu_run(ctx, argv, out, 0, NULL, NULL, NULL, &status)) != GCK_OK)
		goto out;
	if (gck_read_small_file(out, text, sizeof text) == -1 ||
	    !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
	    (s = strstr(text, "Version: ")) == NULL) {
		r = gck_set_error(ctx, GCK_ECRIU, "cannot run '%s': is CRIU "
		    "(4.1 or newer) installed?", argv[0]);
		goto out;
	}
	s += strlen("Version: ");
	s[strcspn(s, "\n")] = '\0';
	snprintf(buf, len, "%s", s);
	r = GCK_OK;
out:
	unlink(out);
	return r;
}

/*
 * Dumps the tree of pid into imgdir, leaving it stopped.  Logs go into
 * workdir.  On failure criu itself resumes the tree.  Returns GCK_OK or
 * GCK_ECRIU with criu's own reason.
 */
struct capture_args {
	struct gck_capture	*cap;
	int			(*post)(void *);
	void			*arg;
};

/*
 * Takes the images; when criu's post-dump hook asks, runs post() while
 * criu still holds the tree, and answers the hook with its outcome.
 */
static int
capture_during(void *arg, pid_t criu)
{
	struct capture_args	*a = arg;
	int			 r;

	if ((r = gck_capture_run(a->cap, criu)) != GCK_OK ||
	    !gck_capture_hooked(a->cap))
		return r;
	r = a->post(a->arg);
	gck_capture_answer(a->cap, r == GCK_OK);
	return r;
}

struct serve_args {
	struct gck_serve	*s;
	struct gck_reader	*rd;
};

static int
serve_during(void *arg, pid_t criu)
{
	struct serve_args	*a = arg;

	return gck_serve_run(a->s, a->rd, criu);
}

int
gck_criu_dump(struct gck_ctx *ctx, pid_t pid, const char *workdir,
    const char *imgdir, int shell_job, struct gck_capture *cap,
    int (*post)(void *), void *arg)
{
	struct capture_args	 ca = { cap, post, arg };
	char	 pidbuf[16], logpath[PATH_MAX], outpath[PATH_MAX], why[512];
	char	 self[PATH_MAX];
	char	*argv[CRIU_ARGS];
	ssize_t	 n;
	int	 argc = 0, status, r;

	if ((n = readlink("/proc/self/exe", self, sizeof self - 1)) == -1 ||
	    (self[n] = '\0', strstr(self, " (deleted)") != NULL))
		return gck_set_error(ctx, GCK_ESYS, "cannot find this "
		    "program's executable, which criu runs after the dump");

	snprintf(pidbuf, sizeof pidbuf, "%d", (int)pid);
	snprintf(logpath, sizeof logpath, "%s/criu-dump.log", workdir);
	snprintf(outpath, sizeof outpath, "%s/criu-dump.out", workdir);
	argv[argc++] = (char *)criu_path();
	argv[argc++] = "dump";
	argv[argc++] = "-t";
	argv[argc++] = pidbuf;
	argv[argc++] = "-D";
	argv[argc++] = (char *)imgdir;
	argv[argc++] = "-o";
	argv[argc++] = logpath;
	argv[argc++] = "-v4";
	argv[argc++] = "--leave-stopped";
	argv[argc++] = "--stream";
	argv[argc++] = "--action-script";
	argv[argc++] = self;
	if (shell_job)
		argv[argc++] = "--shell-job";
	argv[argc] = NULL;
	gck_log(ctx, 2, "running %s dump -t %s --stream%s", argv[0], pidbuf,
	    shell_job ? " --shell-job" : "");
	status = -1;
	r = criu_run(ctx, argv, outpath, 0, gck_capture_hook_path(cap),
	    capture_during, &ca, &status);
	if (r != GCK_OK)
		return r;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		criu_log_error(logpath, outpath, why, sizeof why);
		return gck_set_error(ctx, GCK_ECRIU,
		    "criu dump of pid %d failed: %s", (int)pid, why);
	}
	return GCK_OK;
}

/*
 * Restores the images in imgdir, detached, in a session of its own, tasks
 * left stopped.  Returns GCK_OK with *rootp set, or GCK_ECRIU.
 */
int
gck_criu_restore(struct gck_ctx *ctx, const char *workdir,
    const char *imgdir, int shell_job, struct gck_serve *srv,
    struct gck_reader *rd, pid_t *rootp)
{
	struct serve_args	 sa = { srv, rd };
	char	 logpath[PATH_MAX], outpath[PATH_MAX], pidpath[PATH_MAX];
	char	 why[512], buf[32];
	char	*argv[CRIU_ARGS];
	int	 argc = 0, status, r;
	long	 v;

	*rootp = -1;
	snprintf(logpath, sizeof logpath, "%s/criu-restore.log", workdir);
	snprintf(outpath, sizeof outpath, "%s/criu-restore.out", workdir);
	snprintf(pidpath, sizeof pidpath, "%s/criu-restore.pid", workdir);
	argv[argc++] = (char *)criu_path();
	argv[argc++] = "restore";
	argv[argc++] = "-d";
	argv[argc++] = "-D";
	argv[argc++] = (char *)imgdir;
	argv[argc++] = "-o";
	argv[argc++] = logpath;
	argv[argc++] = "-v4";
	argv[argc++] = "--leave-stopped";
	argv[argc++] = "--pidfile";
	argv[argc++] = pidpath;
	if (srv != NULL)
		argv[argc++] = "--stream";
	if (shell_job)
		argv[argc++] = "--shell-job";
	argv[argc] = NULL;
	gck_log(ctx, 2, "running %s restore%s%s", argv[0], srv != NULL ?
	    " --stream" : "", shell_job ? " --shell-job" : "");
	status = -1;
	r = criu_run(ctx, argv, outpath, 1, NULL, srv != NULL ? serve_during :
	    NULL, &sa, &status);
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
	    gck_read_small_file(pidpath, buf, sizeof buf) != -1 &&
	    (v = strtol(buf, NULL, 10)) > 0)
		*rootp = (pid_t)v;	/* restored, even if the image failed */
	if (r != GCK_OK)
		return r;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		criu_log_error(logpath, outpath, why, sizeof why);
		if (strstr(why, "tty") != NULL)
			return gck_set_error(ctx, GCK_ECRIU, "criu restore "
			    "failed: %s (the tree had a controlling terminal, "
			    "which a detached restore cannot give it: start "
			    "jobs to be moved without one, e.g. with setsid "
			    "and their output in files)", why);
		return gck_set_error(ctx, GCK_ECRIU, "criu restore failed: %s",
		    why);
	}
	if (*rootp <= 0)
		return gck_set_error(ctx, GCK_ECRIU,
		    "criu restore left no pid file");
	return GCK_OK;
}
