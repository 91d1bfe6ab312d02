/* DLPack's C exchange API for tests without a GPU: torch's own table, except that a CPU tensor comes out
 * as a CUDA tensor on device `fake_exchange_device`, and the current stream of device d is
 * `fake_exchange_stream + d`. Python builds the capsule (tests/integration/test_runtime.py) and counts the
 * calls. Declared here as dlpack.h 1.2 has it. */
#include <stdint.h>

typedef struct {
  void *data;
  struct {
    int32_t type, id;
  } device;
  int32_t ndim;
  struct {
    uint8_t code, bits;
    uint16_t lanes;
  } dtype;
  int64_t *shape, *strides;
  uint64_t byte_offset;
} dl_tensor;

typedef struct header {
  struct {
    uint32_t major, minor;
  } version;
  struct header *prev;
} header;

typedef struct {
  header header;
  void *allocator, *managed_from_py, *managed_to_py;
  int (*dltensor_from_py_object)(void *obj, dl_tensor *out);
  int (*current_work_stream)(int device_type, int32_t device_id, void **stream);
} exchange_api;

static const exchange_api *torch_api;
static exchange_api fake;
int fake_exchange_device;
uint64_t fake_exchange_stream = 0x5000;
long fake_exchange_tensors, fake_exchange_streams; /* calls */

static int from_py(void *obj, dl_tensor *out) {
  fake_exchange_tensors++;
  int rc = torch_api->dltensor_from_py_object(obj, out);
  if (rc == 0 && out->device.type == 1) out->device.type = 2, out->device.id = fake_exchange_device;
  return rc;
}

static int current_stream(int device_type, int32_t device_id, void **stream) {
  fake_exchange_streams++;
  *stream = device_type == 2 ? (void *)(uintptr_t)(fake_exchange_stream + (uint64_t)device_id) : (void *)0;
  return 0;
}

/* The fake table over torch's (the pointer its capsule holds); `version` overrides the minor version. */
const exchange_api *fake_exchange(const exchange_api *api, uint32_t minor) {
  torch_api = api;
  fake = *api;
  fake.header.version.minor = minor;
  fake.header.prev = 0;
  fake.dltensor_from_py_object = from_py;
  fake.current_work_stream = current_stream;
  return &fake;
}
