/* A program that uses an installed libember the way an application would. */
#include <ember/ember.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    if (ember_abi_version() != EMBER_ABI_VERSION) return 1;
    ember_model *m = NULL;
    if (ember_model_load("/nonexistent.gguf", NULL, &m) != EMBER_ERR_IO || m != NULL) return 2;
    printf("ember %s ok\n", ember_version());
    return strcmp(ember_version(), EMBER_VERSION_STRING) == 0 ? 0 : 3;
}
