// Variables of the shapes devdl lays out when it moves a program's variables to host memory
// (backend/spirv/place_variables.cpp, placeVariables), and a kernel that reads each back.
typedef struct {
  char c;  // then padding to the long
  long l;
  short s;  // then padding to the struct's end
} Padded;

global Padded Record = {1, 2, 3};
global float3 Vector3 = (float3)(4.0f, 5.0f, 6.0f);  // 16 bytes, 12 of them used
global char Text[5] = "abcd";
global int Table[4] = {10, 20, 30, 40};
global int *global Third = &Table[2];  // an address with an addend: a relocation
int *Generic = &Table[1];              // a generic pointer to a global: an address-space cast
global long Aligned __attribute__((aligned(64))) = 11;
global int Zeros[1000];  // only zeros: no initial bytes

kernel void ReadBack(global int *out) {
  if (get_global_id(0) != 0) return;
  out[0] = Record.c;
  out[1] = (int)Record.l;
  out[2] = Record.s;
  out[3] = (int)Vector3.z;
  out[4] = Text[3];
  out[5] = *Third;
  out[6] = *Generic;
  out[7] = (int)Aligned;
  out[8] = Zeros[999] + Table[0] - 10;  // Table named: llvm-spirv-15 lists in the kernel's interface
                                        // only what it names, where SPIR-V 1.4 asks for all it uses
  Zeros[999] = out[5] + 1;  // written: every variable stays one
  Record.c = 2;
  Text[0] = 'A';
  Vector3.x = 1.0f;
  Aligned = 12;
}
