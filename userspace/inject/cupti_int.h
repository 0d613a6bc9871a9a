/* SPDX-License-Identifier: MIT */
/* What cupti_backend.c and cupti_structs.c share with synth_backend.c, the backend the
 * tests drive without a GPU: the record conversion, the callback and the clock are the
 * production ones. */
#ifndef GPUBPF_INJECT_CUPTI_INT_H
#define GPUBPF_INJECT_CUPTI_INT_H

#include <stddef.h>
#include <stdint.h>

#include <cupti.h>

#define CBID_MAX 1024

/* [domain][cbid]: enum inj_api_class, from cuptiGetCallbackName at attach */
extern uint8_t inj_cb_class[3][CBID_MAX];
/* the device clock the records are stamped with (CUPTI's; the synthetic one in tests) */
extern uint64_t (*inj_device_clock)(void);

uint64_t inj_mono_ns(void);
/* the offset from the device clock to CLOCK_MONOTONIC, sampled now */
void inj_sample_clock(void);
/* one CUPTI activity record into records.c (cupti_structs.c) */
void inj_handle_record(const CUpti_Activity *r);
/* the handle a launch callback's call passes (a host stub, cudaKernel_t or CUfunction) */
uint64_t inj_launch_handle(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *params);
/* CUPTI asks for a buffer for its records, and one comes back (cupti_pool.c) */
void CUPTIAPI inj_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records);
void inj_pool_put(uint8_t *b);
void CUPTIAPI inj_on_callback(void *userdata, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data);

#endif /* GPUBPF_INJECT_CUPTI_INT_H */
