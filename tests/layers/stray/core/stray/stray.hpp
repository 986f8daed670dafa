// A fixture for the layers_detects_stray test: a header in a folder no layer names. Never
// compiled.
#pragma once
