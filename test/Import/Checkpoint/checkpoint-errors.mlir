// Bad checkpoints and prompts: a clear error naming the key, tensor or
// limit, a non-zero exit, and no artifact left behind.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: cp -r %fixtures/models/mixtral/checkpoint %t/good

// An unknown key of config.json.
// RUN: cp -r %t/good %t/key && sed -i 's/"vocab_size"/"vocab_sise"/' %t/key/config.json
// RUN: not moec compile %t/key --target=cpu -o %t/key-art 2>&1 | FileCheck %s --check-prefix=KEY
// KEY: config.json: unknown key 'vocab_sise' for mixtral
// RUN: not ls %t/key-art

// A family moec does not know.
// RUN: cp -r %t/good %t/family && sed -i 's/"model_type": "mixtral"/"model_type": "llama"/' %t/family/config.json
// RUN: not moec compile %t/family --target=cpu -o %t/family-art 2>&1 | FileCheck %s --check-prefix=FAMILY
// FAMILY: 'llama'
// RUN: not ls %t/family-art

// A missing tensor (renamed in its shard's header, same length).
// RUN: cp -r %t/good %t/missing && sed -i 's/model.norm.weight/model.norX.weight/g' %t/missing/*.safetensors %t/missing/model.safetensors.index.json
// RUN: not moec compile %t/missing --target=cpu -o %t/missing-art 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: tensor 'model.norm.weight' is missing (the mixtral layout needs it)
// RUN: not ls %t/missing-art

// A tensor whose shape the config contradicts.
// RUN: cp -r %t/good %t/shape && sed -i 's/"vocab_size": 128/"vocab_size": 127/' %t/shape/config.json
// RUN: not moec compile %t/shape --target=cpu -o %t/shape-art 2>&1 | FileCheck %s --check-prefix=SHAPE
// SHAPE: tensor 'model.embed_tokens.weight' has shape [128, 64], the config implies [127, 64]
// RUN: not ls %t/shape-art

// A prompt and its new tokens longer than the cache (--max-seq), and a batch
// larger than it (--max-batch): errors at run time, no output written.
// RUN: moec compile %t/good --target=cpu --max-batch=1 --max-seq=16 -o %t/small
// RUN: not moec-run %t/small --inputs %fixtures/models/mixtral/prompt.npz --generate 4 --outputs %t/out.npz 2>&1 | FileCheck %s --check-prefix=BATCH
// BATCH: moec_generate: a batch of 2 sequences; the artifact's KV cache holds 1 to 1 (moec compile --max-batch)
// RUN: moec compile %t/good --target=cpu --max-batch=2 --max-seq=16 -o %t/short
// RUN: not moec-run %t/short --inputs %fixtures/models/mixtral/prompt.npz --generate 10 --outputs %t/out.npz 2>&1 | FileCheck %s --check-prefix=SEQ
// SEQ: moec_generate: sequence 0's prompt of 7 tokens and 10 new ones exceed the KV cache's 16 positions (moec compile --max-seq)
// RUN: not ls %t/out.npz
// RUN: moec-run %t/short --inputs %fixtures/models/mixtral/prompt.npz --generate 9 | FileCheck %s --check-prefix=FITS
// FITS: decode: 16 tokens

// --max-batch and --max-seq size a cache, so they need a target.
// RUN: not moec compile %t/good --max-batch=2 2>&1 | FileCheck %s --check-prefix=NEEDS
// NEEDS: --max-batch and --max-seq need --target
