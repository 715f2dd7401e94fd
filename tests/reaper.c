/*
 * reaper -- run a test under a child subreaper.
 *
 * usage: reaper command [arg ...]
 *
 * Processes that a test detaches (restored trees, daemons, orphans) are
 * reparented to us instead of to PID 1, which on some hosts never reaps
 * them.  We reap every child while the command runs, kill whatever is
 * left once it has exited, and exit with the command's status
 * (128 + signal number if it was killed by a signal).
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <sys/types.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int	kill_children(void);
static void	forward(int);

static volatile pid_t	cmdpid = -1;

static void
forward(int sig)
{
	if (cmdpid > 0)
		kill(cmdpid, sig);
}

/*
 * Sends SIGKILL to every process whose parent is us.  Returns how many
 * were signalled.
 */
static int
kill_children(void)
{
	DIR		*d;
	struct dirent	*de;
	FILE		*f;
	char		 path[64], buf[512], *p;
	pid_t		 me = getpid(), pid, ppid;
	int		 n = 0;

	if ((d = opendir("/proc")) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (pid_t)atoi(de->d_name);
		snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		p = fgets(buf, sizeof buf, f);
		fclose(f);
		/* "pid (comm) state ppid ...": comm may hold ')' */
		if (p == NULL || (p = strrchr(buf, ')')) == NULL)
			continue;
		if (sscanf(p + 1, " %*c %d", &ppid) != 1 || ppid != me)
			continue;
		if (kill(pid, SIGKILL) == 0)
			n++;
	}
	closedir(d);
	return n;
}

int
main(int argc, char *argv[])
{
	struct sigaction	 sa;
	pid_t			 pid;
	int			 st, status = 1;

	if (argc < 2) {
		fprintf(stderr, "usage: reaper command [arg ...]\n");
		return 2;
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == -1) {
		perror("reaper: prctl");
		return 1;
	}

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = forward;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	switch (pid = fork()) {
	case -1:
		perror("reaper: fork");
		return 1;
	case 0:
		execvp(argv[1], argv + 1);
		fprintf(stderr, "reaper: %s: %s\n", argv[1], strerror(errno));
		_exit(127);
	}
	cmdpid = pid;

	/* Reap everything until the command itself is done. */
	for (;;) {
		if ((pid = wait(&st)) == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pid != cmdpid)
			continue;
		if (WIFEXITED(st))
			status = WEXITSTATUS(st);
		else if (WIFSIGNALED(st))
			status = 128 + WTERMSIG(st);
		break;
	}
	cmdpid = -1;

	/*
	 * Kill what is left.  A dying child's own children are reparented
	 * to us before we can reap it, so rescan after every reap until
	 * there is nothing left to wait for.
	 */
	for (;;) {
		kill_children();
		if (waitpid(-1, NULL, 0) == -1 && errno == ECHILD)
			break;
	}
	return status;
}
