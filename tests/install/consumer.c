/* An outside C99 program: compiles against the installed header, links -lvigil. */
#include <stdio.h>
#include <vigil/vigil.h>

int main(void) {
  int version = 0;
  vigilRootInfo info;
  char text[2 * VIGIL_ROOT_INFO_BYTES + 1];
  if (vigilGetVersion(&version) != vigilSuccess || version != VIGIL_VERSION_CODE) return 1;
  if (vigilMoeQuantNone != 0 || vigilMoeQuantDynamicInt8 != 2 || vigilMoeExpertTokenNumsPrefixSum != 0 ||
      vigilMoeExpertTokenNumsCount != 1) {
    return 1; /* the MoE mode enums name the integers vigilMoeConfig takes */
  }
  if (vigilChar != vigilInt8 || vigilInt != vigilInt32 || vigilHalf != vigilFloat16 || vigilFloat != vigilFloat32 ||
      vigilDouble != vigilFloat64) {
    return 1; /* NCCL's type names are the same types */
  }
  {
    /* One thread, one communicator: ncclCommInitAll's form, and NCCL's in-place broadcast. */
    vigilComm_t comm = NULL;
    float value = 3.5f;
    if (vigilCommInitAll(&comm, 1) != vigilSuccess ||
        vigilBcast(&value, 1, vigilFloat, 0, comm, NULL) != vigilSuccess || value != 3.5f ||
        vigilCommDestroy(comm) != vigilSuccess) {
      fprintf(stderr, "%s\n", vigilGetLastError(NULL));
      return 1;
    }
  }
  if (vigilGetRootInfo(&info) != vigilSuccess) {
    fprintf(stderr, "%s\n", vigilGetLastError(NULL));
    return 1;
  }
  if (vigilRootInfoToString(&info, text, sizeof text) != vigilSuccess) return 1;
  printf("vigil %d root %.16s...\n", version, text);
  return 0;
}
