# A stand-in for zlib where its headers are missing (a GPU machine's image):
# runtime/CMakeLists.txt asks for zlib for moec_tooling (.npz), which the
# extension neither builds nor links; the loader it links does not use zlib.
if(NOT TARGET ZLIB::ZLIB)
  add_library(ZLIB::ZLIB INTERFACE IMPORTED)
endif()
set(ZLIB_FOUND TRUE)
