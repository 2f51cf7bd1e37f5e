/*===- moec.h - C API of moec's runtime: load and run compiled artifacts ---===*
 *
 * An artifact is what `moec compile --target=cpu|cuda -o DIR` writes: DIR/model.so
 * (the generated code), DIR/weights.bin and DIR/manifest.txt (docs/artifact.md).
 *
 *   moec_model *m = moec_load("mixtral.moec");
 *   if (!m) { fprintf(stderr, "%s\n", moec_last_error()); ... }
 *   moec_tensor in = {"hidden_states", MOEC_F32, 3, shape, data};
 *   moec_tensor out = {"output", MOEC_F32, 3, shape, result};
 *   if (moec_run(m, &in, 1, &out, 1) != 0) { ... moec_last_error() ... }
 *   moec_free(m);
 *
 * Inputs and outputs are matched by name (the graph's input and output names)
 * and checked against the manifest: dtype, rank, every static dimension, and the
 * token dimension (-1 in the manifest) must agree across tensors and be at most
 * moec_max_tokens(). Nothing is written to any output when a check fails.
 * A model runs one moec_run at a time (its workspace is shared); concurrent
 * calls on one model are serialised. Each model has its own thread pool, as
 * many threads as the hardware has, or $MOEC_NUM_THREADS when set at load.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MOEC_MOEC_H
#define MOEC_MOEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct moec_model moec_model;

typedef enum moec_dtype { MOEC_F32 = 0, MOEC_I32 = 1, MOEC_I64 = 2 } moec_dtype;

/* A dense row-major tensor. `data` is read for inputs and written for
 * outputs; `shape` has `rank` entries. `data` is host memory, or, for a CUDA
 * artifact, also device memory of the artifact's device (unified addressing
 * tells them apart). When every input and output is device memory, 256-byte
 * aligned, no output overlaps another buffer, and the model computes each
 * output itself (no output is an input or another output), the model reads
 * the inputs and writes the outputs in place. Its CUDA graph then holds their
 * addresses: a model keeps up to 16 such graphs (one per token count and
 * address set, within 64 graphs in all), and runs that would need more copy.
 * Otherwise inputs reach the model and outputs leave it by copies, on the
 * model's stream. Either way the outputs are written when moec_run returns
 * (for moec_run_async: when the caller's stream reaches the run's end). */
typedef struct moec_tensor {
  const char *name;
  moec_dtype dtype;
  int32_t rank;
  const int64_t *shape;
  void *data;
} moec_tensor;

/* Loads an artifact directory; NULL on error (see moec_last_error). */
moec_model *moec_load(const char *artifact_dir);

/* An expert-parallel group: the rank this process runs as, the number of
 * ranks, and the all-reduce that sums `count` floats at `data` over the ranks
 * in place, every rank getting the same bits (`stream`: NULL for host memory,
 * else the cudaStream_t itself, cast to void *, that orders device memory
 * `data`: the all-reduce is queued on it, and may be captured into a CUDA
 * graph there, as a CUDA model's is); it
 * returns 0, or nonzero with a NUL-terminated message in `error` (at most
 * `error_bytes`). The runtime's communicators fill one (the host's over TCP,
 * NCCL's on GPUs); `context` is theirs. */
typedef struct moec_communicator {
  void *context;
  int rank;
  int size;
  int (*all_reduce_sum_f32)(void *context, float *data, uint64_t count, void *stream,
                            char *error, size_t error_bytes);
  /* The same for bf16 values (their bits), summed in f32 and rounded once. */
  int (*all_reduce_sum_bf16)(void *context, uint16_t *data, uint64_t count, void *stream,
                             char *error, size_t error_bytes);
  /* Waits until the work queued on `stream` (a cudaStream_t, as above) so far
   * is done, ending within the group's timeout, with the group's error, where
   * a peer died or stalled inside a collective; 0 or nonzero as above. NULL
   * where there is nothing to watch: the caller waits as it would alone. A
   * CUDA model ends each run with it instead of a plain synchronisation. */
  int (*wait)(void *context, void *stream, char *error, size_t error_bytes);
} moec_communicator;

/* Loads an artifact compiled for `comm->size` expert-parallel ranks (moec
 * compile --ep-size=N) as rank `comm->rank`: the weights of the rank's experts
 * alone are read, and the model all-reduces through `comm`, which must
 * outlive it. Every rank loads the same artifact and runs the same inputs.
 * NULL on error (a single-device artifact, another group size). */
moec_model *moec_load_expert_parallel(const char *artifact_dir, const moec_communicator *comm);
/* Runs the model; 0 on success, -1 on error (see moec_last_error). */
int moec_run(moec_model *model, const moec_tensor *inputs, size_t num_inputs,
             moec_tensor *outputs, size_t num_outputs);
/* Like moec_run, but queued on `stream` (a cudaStream_t of the model's device,
 * or NULL for its legacy default stream) without waiting for the GPU: the run
 * starts after the work queued on `stream` so far, and work queued on it after
 * this call starts once the run has written the outputs. Until then the inputs
 * must keep their values and every buffer must stay allocated. The checks are
 * moec_run's, made before anything is queued. Runs on one model execute in the
 * order of their calls whatever their streams (they share the model's own
 * stream and workspace). With device memory this is how a caller keeps the GPU
 * fed, and the one wait is the caller's; copies to or from pageable host memory
 * make the call wait as cudaMemcpyAsync does. CUDA artifacts only: for a CPU
 * artifact the call fails and runs nothing. */
int moec_run_async(moec_model *model, const moec_tensor *inputs, size_t num_inputs,
                   moec_tensor *outputs, size_t num_outputs, void *stream);
void moec_free(moec_model *model);
/* The message of this thread's last failed call ("" when none). */
const char *moec_last_error(void);

/* What the manifest declares. Shapes hold -1 for the token dimension. */
/* "cpu" or "cuda" (NULL for a null model). */
const char *moec_target(const moec_model *model);
int64_t moec_max_tokens(const moec_model *model);
size_t moec_num_inputs(const moec_model *model);
size_t moec_num_outputs(const moec_model *model);
const char *moec_input_name(const moec_model *model, size_t index);
const char *moec_output_name(const moec_model *model, size_t index);
moec_dtype moec_input_dtype(const moec_model *model, size_t index);
moec_dtype moec_output_dtype(const moec_model *model, size_t index);
int32_t moec_input_rank(const moec_model *model, size_t index);
int32_t moec_output_rank(const moec_model *model, size_t index);
const int64_t *moec_input_shape(const moec_model *model, size_t index);
const int64_t *moec_output_shape(const moec_model *model, size_t index);
/* "f32", "i32", "i64". */
const char *moec_dtype_name(moec_dtype dtype);

/* Whole models. An artifact compiled from a whole model (`moec compile MODEL
 * --max-batch=B --max-seq=S`) keeps a KV cache of B sequences of S positions
 * between runs. One moec_run is a step: `input_ids`, `positions` and
 * `sequences` (i64 [N]) name N tokens of any sequences (a prefill of several
 * prompts, or one new token per sequence), and `logits` (f32 [N, V]) are
 * theirs. Each token's key and value enter the cache of its sequence at its
 * position; a sequence's positions fill from 0 without gaps. */

/* The cache's sequences and positions (0 for a block), and V. */
int64_t moec_max_batch(const moec_model *model);
int64_t moec_max_seq(const moec_model *model);
int64_t moec_vocab_size(const moec_model *model);
/* Empties sequence `sequence` of the cache (every sequence when negative). */
int moec_reset(moec_model *model, int64_t sequence);

/* The model's forward without a cache, as exported: `input_ids` [batch,
 * length] (batch <= max batch, length <= max seq) to `logits` [batch, length,
 * V]; the cache is emptied first. */
int moec_forward(moec_model *model, const int64_t *input_ids, int64_t batch, int64_t length,
                 float *logits);

/* How moec_generate picks a token: greedy (the largest logit, the first of
 * ties) when `temperature` is 0; otherwise a draw from softmax(logits /
 * temperature) restricted to the `top_k` largest (0: all) and to the smallest
 * set of those whose probability reaches `top_p` (1: all). Each draw is a
 * hash of (`seed`, sequence, new token number), the same on the CPU and the
 * GPU, which pick the same token from the same logits
 * (moec/runtime/Sampling.h states the rule exactly). */
typedef struct moec_sampling {
  float temperature;
  int32_t top_k;
  float top_p;
  uint64_t seed;
} moec_sampling;

typedef struct moec_generate_stats {
  int64_t prefill_tokens, decode_tokens;
  double prefill_seconds, decode_seconds;
} moec_generate_stats;

/* Generates `max_new_tokens` tokens after each of `batch` prompts. `input_ids`
 * is [batch, length]; `attention_mask` (NULL: all ones) marks each prompt's
 * tokens with 1 and its padding with 0, the ones contiguous (left or right
 * padding). `sequences` [batch, length + max_new_tokens] receives the prompts
 * as given followed by the new tokens, as transformers' generate returns them.
 * The prefill runs in steps of at most max tokens; `stats` (may be NULL) gets
 * the tokens and seconds of the prefill and of the decode steps. The cache is
 * emptied first. A CUDA artifact keeps the tokens on the device: its decode
 * steps and their sampling are queued on one stream without waiting for the
 * host, which waits after the prefill and after the last step (the stats'
 * boundaries); $MOEC_DEVICE_GENERATE=0 picks on the host after each step. */
int moec_generate(moec_model *model, const int64_t *input_ids, const int64_t *attention_mask,
                  int64_t batch, int64_t length, int64_t max_new_tokens,
                  const moec_sampling *sampling, int64_t *sequences,
                  moec_generate_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* MOEC_MOEC_H */
