/*
 * tend-spawner: the numbers of the new mount API's system calls (open_tree, move_mount, fsopen,
 * fsconfig, fsmount, mount_setattr), for C libraries whose headers predate them. hidden.c and
 * idmap.c call them through syscall(2).
 */
#ifndef TEND_MOUNT_API_H
#define TEND_MOUNT_API_H
#include <sys/syscall.h>

#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_fsopen
#define SYS_fsopen 430
#endif
#ifndef SYS_fsconfig
#define SYS_fsconfig 431
#endif
#ifndef SYS_fsmount
#define SYS_fsmount 432
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif

#endif
