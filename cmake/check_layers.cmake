# The `layers` test: every quoted #include of a file in a layer's folders names a header of
# that layer or of a layer below it, and every source folder of core/, backends/, dsl/ and
# cli/ belongs to a layer (cmake/layers.cmake wrote the table).
#   cmake -DLAYERS=<build>/layers.txt -DROOT=<tree to check> -P cmake/check_layers.cmake
# Exits non-zero after listing each include against the table.
cmake_minimum_required(VERSION 3.22)
if(NOT LAYERS OR NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DLAYERS=layers.txt -DROOT=source_dir -P check_layers.cmake")
endif()

file(STRINGS ${LAYERS} table)
set(names "")
foreach(line IN LISTS table)
  string(REPLACE "|" ";" fields "${line}|")
  list(GET fields 0 name)
  list(GET fields 1 dirs)
  list(GET fields 2 below)
  string(REPLACE "," ";" dirs "${dirs}")
  string(REPLACE "," ";" below "${below}")
  list(APPEND names ${name})
  set(dirs_${name} ${dirs})
  set(below_${name} ${below})
  foreach(dir IN LISTS dirs)
    set(layer_of_${dir} ${name})
  endforeach()
endforeach()

set(violations 0)
set(checked 0)
foreach(name IN LISTS names)
  foreach(dir IN LISTS dirs_${name})
    file(GLOB files ${ROOT}/${dir}/*.cpp ${ROOT}/${dir}/*.hpp ${ROOT}/${dir}/*.cu ${ROOT}/${dir}/*.cuh)
    foreach(file IN LISTS files)
      math(EXPR checked "${checked} + 1")
      file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
      foreach(include IN LISTS includes)
        string(REGEX REPLACE "^[^\"]*\"([^\"]+)\".*$" "\\1" header "${include}")
        get_filename_component(header_dir ${header} DIRECTORY)
        if(NOT DEFINED layer_of_${header_dir})
          continue()  # a path relative to the file, or outside every layer
        endif()
        set(target ${layer_of_${header_dir}})
        if(target STREQUAL name OR target IN_LIST below_${name})
          continue()
        endif()
        file(RELATIVE_PATH shown ${ROOT} ${file})
        string(REPLACE ";" ", " allowed "${below_${name}}")
        if(allowed STREQUAL "")
          set(allowed "none")
        endif()
        message("${shown}: includes \"${header}\" of layer '${target}', above '${name}' "
                "(${name} may include: ${allowed})")
        math(EXPR violations "${violations} + 1")
      endforeach()
    endforeach()
  endforeach()
endforeach()

# A source folder in no layer would be built by nobody and checked by nothing: name it.
file(GLOB_RECURSE all_sources RELATIVE ${ROOT}
     ${ROOT}/core/*.cpp ${ROOT}/core/*.hpp ${ROOT}/backends/*.cpp ${ROOT}/backends/*.hpp
     ${ROOT}/backends/*.cu ${ROOT}/backends/*.cuh ${ROOT}/dsl/*.cpp ${ROOT}/dsl/*.hpp
     ${ROOT}/cli/*.cpp ${ROOT}/cli/*.hpp)
foreach(file IN LISTS all_sources)
  get_filename_component(dir ${file} DIRECTORY)
  if(NOT DEFINED layer_of_${dir})
    message("${file}: folder ${dir} is in no layer; add it to a perfsim_layer line (CMakeLists.txt)")
    math(EXPR violations "${violations} + 1")
  endif()
endforeach()

if(checked EQUAL 0)
  message(FATAL_ERROR "no source files under ${ROOT} in any layer's folders")
endif()
if(violations GREATER 0)
  message(FATAL_ERROR "${violations} file(s) against the layer table (CMakeLists.txt, perfsim_layer)")
endif()
message("layers: ${checked} files, every include within its layer or below")
