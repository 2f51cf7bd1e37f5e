/* moec.h is a C header: this file only has to compile as C (and links into
 * moec-runtime-tests so that the C declarations match the definitions). */
#include "moec/moec.h"

const char *moecCApiHeaderCompilesAsC(void) {
  moec_model *model = moec_load("/nonexistent/artifact");
  if (!model)
    return moec_last_error();
  moec_free(model);
  return "";
}
