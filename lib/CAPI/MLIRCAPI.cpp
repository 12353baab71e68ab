//===- MLIRCAPI.cpp - libPFMLIRCAPI.so ------------------------------------===//
//
// libPFMLIRCAPI.so holds MLIR's C API, linked in whole from Debian's static
// archives (lib/CAPI/CMakeLists.txt); this file only gives CMake a source to
// build the library from. It must stay free of pf code: see there.
//
//===----------------------------------------------------------------------===//
