/*
 * plaitrun: what a host name may be, and whether it names this host (its
 * workers then start by fork/exec, not over ssh). Shared by -H/--hostfile
 * (horovod_flags.c) and the elastic driver's discovery (elastic/discovery.c).
 */
#ifndef PLAITRUN_HOSTNAMES_H
#define PLAITRUN_HOSTNAMES_H

/* 1 for localhost, localhost.localdomain, 127.*, ::1, and this host's name
 * (full or short). */
int plaitrun_is_this_host(const char *name);

/* 1 for a name ssh and the resolver can take: letters, digits, '.', '-',
 * '_', ':' (IPv6), '[' ']', not starting with '-' (it would read as an ssh
 * option), shorter than PLAITRUN_HOST_NAME_MAX. */
int plaitrun_valid_host_name(const char *name);

#endif
