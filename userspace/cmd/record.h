/* SPDX-License-Identifier: MIT */
#ifndef GPUBPF_RECORD_H
#define GPUBPF_RECORD_H

/* `gpubpf record ...`: argv[0] is "record". Returns 0 or a negative errno. */
int record__main(int argc, char **argv);

#endif /* GPUBPF_RECORD_H */
