/*
 * gpuckpt-hook: the action script criu runs while gpuckpt dumps a tree
 * (criu --action-script), installed in $(libexecdir)/gpuckpt.
 *
 * It is a program of its own, as OpenSSH's ssh-keysign and sftp-server
 * are, so that no command's main() has to ask first whether criu ran it
 * as its hook; and gpuckpt-keeper, beside it, is one so that the
 * process criu restores under holds none of the restoring command's
 * memory.  At post-dump it asks the checkpoint, over the socket that
 * GCK_CRIU_HOOK names, whether criu is to go on: exit status 0 when it
 * is, 1 when not (criu then resumes the tree).  Every other action goes
 * on.
 */
#include "config.h"

#include <stdio.h>

#include "gpuckpt.h"

int
main(int argc, char *argv[])
{
	switch (gck_dump_hook()) {
	case GCK_OK:
		return 0;
	case GCK_EINVAL:
		fprintf(stderr, "gpuckpt-hook: criu(8) runs this while "
		    "gpuckpt(1) checkpoints; it is not to be run by hand\n");
		return 2;
	default:
		return 1;
	}
}
