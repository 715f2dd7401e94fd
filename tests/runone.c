/*
 * runone -- run one command as a child subreaper, and say how it went.
 *
 * usage: runone [-t seconds] -r report -- command [arg ...]
 *
 * The command runs in a session of its own, with our standard input,
 * output and error (we give up our copy of standard input, so that a
 * writer into a pipe there sees the command go).  It is killed, with
 * its process group, after the given number of seconds (30 by default).
 * Once it has exited we reap the processes it left to us for up to two
 * seconds; those still there are named in the report, then killed.
 *
 * The report file gets one "key value" line each:
 *	status N	its exit status (absent if killed by a signal)
 *	signal N	the signal that killed it
 *	timeout 1	it was still running when the time was up
 *	rss N		the peak RSS in KiB of it and of every process of
 *			the run that was reaped (getrusage RUSAGE_CHILDREN)
 *	elapsed S	seconds from start to exit
 *	left PID COMM	a process left behind
 * We exit 0 if the report was written, 125 if not (and say why).
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <sys/types.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void	alarmed(int);
static double	now(void);
static int	report_left(FILE *);
static int	reap_all(void);

static volatile sig_atomic_t	timed_out;
static volatile pid_t		cmdpid = -1;

static void
alarmed(int sig)
{
	(void)sig;
	timed_out = 1;
	if (cmdpid > 0) {
		kill(-cmdpid, SIGKILL);
		kill(cmdpid, SIGKILL);
	}
}

static double
now(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Reaps what has exited.  Returns 1 if no child is left, else 0. */
static int
reap_all(void)
{
	pid_t	p;
	int	st;

	while ((p = waitpid(-1, &st, WNOHANG)) > 0)
		;
	return p == -1 && errno == ECHILD;
}

/*
 * Names each process whose parent is us in the report, kills it and
 * reaps it.  Returns how many there were.
 */
static int
report_left(FILE *rep)
{
	DIR		*d;
	struct dirent	*de;
	FILE		*f;
	char		 path[300], buf[512], *p, *q;
	pid_t		 me = getpid(), pid, ppid;
	int		 n = 0;

	if ((d = opendir("/proc")) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(buf, sizeof buf, f) == NULL) {
			fclose(f);
			continue;
		}
		fclose(f);
		if ((p = strchr(buf, '(')) == NULL ||
		    (q = strrchr(buf, ')')) == NULL || q < p)
			continue;
		*q = '\0';
		if (sscanf(q + 2, "%*c %d", &ppid) != 1 || ppid != me)
			continue;
		pid = (pid_t)atoi(de->d_name);
		for (q = p + 1; *q != '\0'; q++)
			if (!isgraph((unsigned char)*q))
				*q = '?';
		fprintf(rep, "left %d %s\n", (int)pid, p + 1);
		kill(pid, SIGKILL);
		n++;
	}
	closedir(d);
	while (waitpid(-1, NULL, 0) > 0)
		;
	return n;
}

int
main(int argc, char **argv)
{
	struct sigaction	 sa;
	struct rusage		 ru;
	FILE			*rep;
	const char		*report = NULL;
	double			 t0, elapsed, deadline;
	pid_t			 pid, p;
	int			 c, st, fd, seconds = 30;

	while ((c = getopt(argc, argv, "+r:t:")) != -1) {
		switch (c) {
		case 'r':
			report = optarg;
			break;
		case 't':
			seconds = atoi(optarg);
			break;
		default:
			goto usage;
		}
	}
	if (report == NULL || optind >= argc || seconds <= 0)
		goto usage;
	if ((rep = fopen(report, "we")) == NULL) {
		fprintf(stderr, "runone: %s: %s\n", report, strerror(errno));
		return 125;
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) == -1) {
		fprintf(stderr, "runone: prctl: %s\n", strerror(errno));
		return 125;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = alarmed;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);		/* no SA_RESTART */
	signal(SIGPIPE, SIG_DFL);
	t0 = now();
	switch (pid = fork()) {
	case -1:
		fprintf(stderr, "runone: fork: %s\n", strerror(errno));
		return 125;
	case 0:
		setsid();
		execvp(argv[optind], argv + optind);
		fprintf(stderr, "runone: %s: %s\n", argv[optind],
		    strerror(errno));
		_exit(127);
	}
	cmdpid = pid;
	if ((fd = open("/dev/null", O_RDONLY)) != -1) {
		dup2(fd, STDIN_FILENO);
		if (fd != STDIN_FILENO)
			close(fd);
	}
	alarm(seconds);
	while ((p = waitpid(pid, &st, 0)) != pid) {
		if (p == -1 && errno != EINTR) {
			fprintf(stderr, "runone: wait: %s\n", strerror(errno));
			return 125;
		}
	}
	alarm(0);
	elapsed = now() - t0;
	if (timed_out)
		fprintf(rep, "timeout 1\n");
	if (WIFSIGNALED(st))
		fprintf(rep, "signal %d\n", WTERMSIG(st));
	else
		fprintf(rep, "status %d\n", WEXITSTATUS(st));
	fprintf(rep, "elapsed %.3f\n", elapsed);
	/* What the run left to us: gone within two seconds, or named. */
	deadline = now() + 2;
	while (!reap_all() && now() < deadline)
		usleep(20000);
	if (!reap_all())
		report_left(rep);
	if (getrusage(RUSAGE_CHILDREN, &ru) == 0)
		fprintf(rep, "rss %ld\n", ru.ru_maxrss);
	if (fclose(rep) != 0) {
		fprintf(stderr, "runone: %s: %s\n", report, strerror(errno));
		return 125;
	}
	return 0;

usage:
	fprintf(stderr, "usage: runone [-t seconds] -r report -- command "
	    "[arg ...]\n");
	return 125;
}
