// consumer ARTIFACT [INPUTS.npz EXPECTED.npz]: loads ARTIFACT through moec's C API
// (moec::runtime) and prints the error, or its inputs and outputs; given the
// .npz files, runs it on the inputs and compares with the expected outputs
// (moec::tooling). Exit status as moec-run's: 0, 1 a mismatch, 2 an error.
#include "moec/moec.h"
#include "moec/runtime/Compare.h"
#include "moec/runtime/Npz.h"

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  if (argc != 2 && argc != 4) {
    std::fprintf(stderr, "usage: consumer ARTIFACT [INPUTS.npz EXPECTED.npz]\n");
    return 2;
  }
  moec_model *model = moec_load(argv[1]);
  if (!model) {
    std::printf("moec_load: %s\n", moec_last_error());
    return 2;
  }
  std::printf("loaded a %s artifact: %zu inputs, %zu outputs\n", moec_target(model),
              moec_num_inputs(model), moec_num_outputs(model));
  int rc = 0;
  if (argc == 4) {
    moec::rt::TensorMap inputs, outputs;
    std::vector<moec_tensor> apiInputs, apiOutputs;
    std::vector<moec::rt::NamedOutput> named;
    std::string report;
    bool passed = false;
    if (moec::rt::Status status = moec::rt::readNpz(argv[2], inputs); !status) {
      std::printf("%s\n", status.message().c_str());
      rc = 2;
    }
    for (size_t i = 0; rc == 0 && i < moec_num_inputs(model); ++i) {
      moec::rt::HostTensor &tensor = inputs[moec_input_name(model, i)];
      apiInputs.push_back({moec_input_name(model, i), moec_input_dtype(model, i),
                           static_cast<int32_t>(tensor.shape().size()), tensor.shape().data(),
                           tensor.data()});
    }
    // Outputs: f32 with the first input's leading dimensions where the
    // manifest's are dynamic (the fixture's [batch, tokens, hidden]).
    for (size_t i = 0; rc == 0 && i < moec_num_outputs(model); ++i) {
      const int64_t *declared = moec_output_shape(model, i);
      std::vector<int64_t> shape(declared, declared + moec_output_rank(model, i));
      for (size_t d = 0; d < shape.size(); ++d)
        if (shape[d] < 0)
          shape[d] = inputs.begin()->second.shape()[d];
      moec::rt::HostTensor &tensor = outputs[moec_output_name(model, i)] =
          moec::rt::HostTensor(moec::rt::DType::F32, shape);
      apiOutputs.push_back({moec_output_name(model, i), MOEC_F32,
                            static_cast<int32_t>(tensor.shape().size()), tensor.shape().data(),
                            tensor.data()});
      named.emplace_back(moec_output_name(model, i), &tensor);
    }
    if (rc == 0 && moec_run(model, apiInputs.data(), apiInputs.size(), apiOutputs.data(),
                            apiOutputs.size())) {
      std::printf("moec_run: %s\n", moec_last_error());
      rc = 2;
    }
    if (rc == 0) {
      // As the fixtures' checks: atol scaled by max(1, max |expected|).
      moec::rt::Tolerance tolerance{1e-5, 1e-6, /*scaleAtol=*/true};
      moec::rt::Status status =
          moec::rt::compareOutputsWithFile(named, argv[3], tolerance, report, passed);
      std::printf("%s", status ? report.c_str() : (status.message() + "\n").c_str());
      rc = !status ? 2 : passed ? 0 : moec::rt::kCompareMismatch;
    }
  }
  moec_free(model);
  return rc;
}
