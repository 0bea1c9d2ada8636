/* SPDX-License-Identifier: Apache-2.0 */
/* nvml.h: our own declarations of the NVML subset gpuslice uses (types, return codes,
 * constants, struct layouts, versioned prototypes and their dlsym pointer types), written
 * from the public ABI facts; no NVIDIA header is needed. Only gpu/ and tools/fake-nvml/
 * include it. The names are NVML's own on purpose: this is the ABI boundary. */
#ifndef GS_GPU_NVML_H
#define GS_GPU_NVML_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The symbol-visibility hook: the fake library defines NVML_EXPORT before including this. */
#ifndef NVML_EXPORT
#define NVML_EXPORT
#endif

#define NVML_API_VERSION 12

/* ---- return codes ------------------------------------------------------------------------ */

typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_INVALID_STATE = 29,
    NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

/* ---- opaque handles ---------------------------------------------------------------------- */

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;
typedef struct nvmlUnit_st *nvmlUnit_t;

/* ---- constants --------------------------------------------------------------------------- */

#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_ASCII_LEN 41
#define NVML_DEVICE_UUID_BINARY_LEN 16
#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_SERIAL_BUFFER_SIZE 30
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_DEVICE_PCI_BUS_ID_FMT "%08X:%02X:%02X.0"
#define NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT "%04X:%02X:%02X.0"
/* 18 is the value of the 11.8–13.2 headers (12 before, 36 in 13.3). */
#define NVML_NVLINK_MAX_LINKS 18
#define NVML_VALUE_NOT_AVAILABLE (-1)

#define NVML_INIT_FLAG_NO_GPUS 1
#define NVML_INIT_FLAG_NO_ATTACH 2
#define NVML_INIT_FLAG_FORCE_INIT 4

#define NVML_CUDA_DRIVER_VERSION_MAJOR(v) ((v) / 1000)
#define NVML_CUDA_DRIVER_VERSION_MINOR(v) (((v) % 1000) / 10)

#define NVML_DEVICE_MIG_DISABLE 0x0
#define NVML_DEVICE_MIG_ENABLE 0x1

#define INVALID_GPU_INSTANCE_PROFILE_ID 0xFFFFFFFF
#define INVALID_GPU_INSTANCE_ID 0xFFFFFFFF

/* GPU-instance profile INDEXES (what GetGpuInstanceProfileInfo takes). Not the profile
 * IDs that placements/create/remaining-capacity take: those come back in info.id. */
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_GPU_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_GPU_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_GPU_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 0x7
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 0x8
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 0x9
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX 0x0A
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX 0x0B
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX 0x0C
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME 0x0D
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME 0x0E
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME 0x0F
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME 0x10
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX 0x11
#define NVML_GPU_INSTANCE_PROFILE_COUNT 0x12

#define NVML_GPU_INSTANCE_PROFILE_CAPS_P2P 0x1
#define NVML_GPU_INSTANCE_PROFILE_CAPS_GFX 0x2

/* Compute-instance profile indexes; nvidia-smi's CI "ID" equals the index. */
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 0x7
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE_NVL 0x8
#define NVML_COMPUTE_INSTANCE_PROFILE_COUNT 0x9

#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0x0
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT 0x1
#define NVML_COMPUTE_INSTANCE_PROFILE_CAPS_GFX 0x1

/* Event types (unsigned long long bit mask). */
#define nvmlEventTypeNone 0x0ULL
#define nvmlEventTypeSingleBitEccError 0x1ULL
#define nvmlEventTypeDoubleBitEccError 0x2ULL
#define nvmlEventTypePState 0x4ULL
#define nvmlEventTypeXidCriticalError 0x8ULL
#define nvmlEventTypeClock 0x10ULL
#define nvmlEventTypePowerSourceChange 0x80ULL
#define nvmlEventMigConfigChange 0x100ULL
#define nvmlEventTypeSingleBitEccErrorStorm 0x200ULL
#define nvmlEventTypeDramRetirementEvent 0x400ULL
#define nvmlEventTypeDramRetirementFailure 0x800ULL
#define nvmlEventTypeNonFatalPoisonError 0x1000ULL
#define nvmlEventTypeFatalPoisonError 0x2000ULL
#define nvmlEventTypeGpuUnavailableError 0x4000ULL
#define nvmlEventTypeGpuRecoveryAction 0x8000ULL
#define nvmlEventTypeAll                                                                           \
    (nvmlEventTypeNone | nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError |         \
     nvmlEventTypePState | nvmlEventTypeXidCriticalError | nvmlEventTypeClock |                    \
     nvmlEventTypePowerSourceChange | nvmlEventMigConfigChange |                                   \
     nvmlEventTypeSingleBitEccErrorStorm | nvmlEventTypeDramRetirementEvent |                      \
     nvmlEventTypeDramRetirementFailure | nvmlEventTypeNonFatalPoisonError |                       \
     nvmlEventTypeFatalPoisonError | nvmlEventTypeGpuUnavailableError |                            \
     nvmlEventTypeGpuRecoveryAction)

/* ---- enums ------------------------------------------------------------------------------- */

typedef unsigned int nvmlDeviceArchitecture_t;
#define NVML_DEVICE_ARCH_KEPLER 2
#define NVML_DEVICE_ARCH_MAXWELL 3
#define NVML_DEVICE_ARCH_PASCAL 4
#define NVML_DEVICE_ARCH_VOLTA 5
#define NVML_DEVICE_ARCH_TURING 6
#define NVML_DEVICE_ARCH_AMPERE 7
#define NVML_DEVICE_ARCH_ADA 8
#define NVML_DEVICE_ARCH_HOPPER 9
#define NVML_DEVICE_ARCH_BLACKWELL 10
#define NVML_DEVICE_ARCH_T23X 11
#define NVML_DEVICE_ARCH_RUBIN 13
#define NVML_DEVICE_ARCH_UNKNOWN 0xffffffff

typedef enum nvmlBrandType_enum {
    NVML_BRAND_UNKNOWN = 0,
    NVML_BRAND_QUADRO = 1,
    NVML_BRAND_TESLA = 2,
    NVML_BRAND_NVS = 3,
    NVML_BRAND_GRID = 4,
    NVML_BRAND_GEFORCE = 5,
    NVML_BRAND_TITAN = 6,
    NVML_BRAND_NVIDIA_VAPPS = 7,
    NVML_BRAND_NVIDIA_VPC = 8,
    NVML_BRAND_NVIDIA_VCS = 9,
    NVML_BRAND_NVIDIA_VWS = 10,
    NVML_BRAND_NVIDIA_CLOUD_GAMING = 11,
    NVML_BRAND_NVIDIA_VGAMING = NVML_BRAND_NVIDIA_CLOUD_GAMING,
    NVML_BRAND_QUADRO_RTX = 12,
    NVML_BRAND_NVIDIA_RTX = 13,
    NVML_BRAND_NVIDIA = 14,
    NVML_BRAND_GEFORCE_RTX = 15,
    NVML_BRAND_TITAN_RTX = 16,
    NVML_BRAND_COUNT
} nvmlBrandType_t;

typedef enum nvmlGpuLevel_enum {
    NVML_TOPOLOGY_INTERNAL = 0,
    NVML_TOPOLOGY_SINGLE = 10,
    NVML_TOPOLOGY_MULTIPLE = 20,
    NVML_TOPOLOGY_HOSTBRIDGE = 30,
    NVML_TOPOLOGY_NODE = 40,
    NVML_TOPOLOGY_SYSTEM = 50
} nvmlGpuTopologyLevel_t;
#define NVML_TOPOLOGY_CPU NVML_TOPOLOGY_NODE

typedef enum nvmlEnableState_enum {
    NVML_FEATURE_DISABLED = 0,
    NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;

typedef enum nvmlTemperatureSensors_enum {
    NVML_TEMPERATURE_GPU = 0,
    NVML_TEMPERATURE_COUNT
} nvmlTemperatureSensors_t;

/* ---- structs (LP64 layouts; checked below) ----------------------------------------------- */

#define NVML_STRUCT_VERSION(data, ver)                                                             \
    (unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((ver) << 24U))

typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId; /* device << 16 | 0x10DE */
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
    unsigned long long total; /* bytes */
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

typedef struct nvmlUtilization_st {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct nvmlProcessInfo_v1_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct nvmlProcessInfo_v2_st {
    unsigned int pid;
    unsigned long long usedGpuMemory; /* bytes */
    unsigned int gpuInstanceId;       /* 0xFFFFFFFF outside MIG */
    unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;
typedef nvmlProcessInfo_v2_t nvmlProcessInfo_t;

typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData; /* the Xid for XidCriticalError */
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

typedef struct nvmlGpuInstancePlacement_st {
    unsigned int start; /* memory slices */
    unsigned int size;
} nvmlGpuInstancePlacement_t;

typedef struct nvmlGpuInstanceProfileInfo_st {
    unsigned int id;
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstanceProfileInfo_v2_st {
    unsigned int version;
    unsigned int id;
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} nvmlGpuInstanceProfileInfo_v2_t;
#define nvmlGpuInstanceProfileInfo_v2 NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2)

typedef struct nvmlGpuInstanceProfileInfo_v3_st {
    unsigned int version;
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned int capabilities;
} nvmlGpuInstanceProfileInfo_v3_t;
#define nvmlGpuInstanceProfileInfo_v3 NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 3)

typedef struct nvmlGpuInstanceInfo_st {
    nvmlDevice_t device;
    unsigned int id;
    unsigned int profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct nvmlComputeInstancePlacement_st {
    unsigned int start; /* compute slices within the GPU instance */
    unsigned int size;
} nvmlComputeInstancePlacement_t;

typedef struct nvmlComputeInstanceProfileInfo_st {
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct nvmlComputeInstanceProfileInfo_v2_st {
    unsigned int version;
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} nvmlComputeInstanceProfileInfo_v2_t;
#define nvmlComputeInstanceProfileInfo_v2 NVML_STRUCT_VERSION(ComputeInstanceProfileInfo, 2)

typedef struct nvmlComputeInstanceProfileInfo_v3_st {
    unsigned int version;
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned int capabilities;
} nvmlComputeInstanceProfileInfo_v3_t;
#define nvmlComputeInstanceProfileInfo_v3 NVML_STRUCT_VERSION(ComputeInstanceProfileInfo, 3)

typedef struct nvmlComputeInstanceInfo_st {
    nvmlDevice_t device;
    nvmlGpuInstance_t gpuInstance;
    unsigned int id;
    unsigned int profileId;
    nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

/* nvmlDeviceGetAttributes_v2: for a MIG device, its compute instance's SMs and shared
 * engines and its GPU instance's slices and memory. */
typedef struct nvmlDeviceAttributes_st {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    unsigned int gpuInstanceSliceCount;
    unsigned int computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

/* telemetry: SM clock, ECC totals, per-process utilization samples */
typedef enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 } nvmlClockType_t;
typedef enum {
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
} nvmlMemoryErrorType_t;
typedef enum { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 } nvmlEccCounterType_t;
typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

/* nvmlDeviceGetFieldValues: the fields dcgm-exporter's defaults read that have no call of
 * their own. NVLink throughput takes the link in scopeId; UINT_MAX sums every link. */
#define NVML_FI_DEV_MEMORY_TEMP 82
#define NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX 140 /* KiB, data + protocol overhead */
#define NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX 141
typedef enum {
    NVML_VALUE_TYPE_DOUBLE = 0,
    NVML_VALUE_TYPE_UNSIGNED_INT = 1,
    NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
    NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
    NVML_VALUE_TYPE_SIGNED_INT = 5,
    NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
} nvmlValueType_t;
typedef union nvmlValue_st {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvmlValue_t;
typedef struct nvmlFieldValue_st {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp; /* us since 1970 */
    long long latencyUsec;
    nvmlValueType_t valueType;
    nvmlReturn_t nvmlReturn; /* per field: value is undefined unless NVML_SUCCESS */
    nvmlValue_t value;
} nvmlFieldValue_t;

/* nvmlDeviceGetGridLicensableFeatures_v4: vGPU software licensing, in a vGPU guest. */
#define NVML_GRID_LICENSE_BUFFER_SIZE 128
#define NVML_GRID_LICENSE_FEATURE_MAX_COUNT 3
typedef enum {
    NVML_GRID_LICENSE_FEATURE_CODE_UNKNOWN = 0,
    NVML_GRID_LICENSE_FEATURE_CODE_VGPU = 1,
    NVML_GRID_LICENSE_FEATURE_CODE_NVIDIA_RTX = 2,
    NVML_GRID_LICENSE_FEATURE_CODE_GAMING = 3,
    NVML_GRID_LICENSE_FEATURE_CODE_COMPUTE = 4,
} nvmlGridLicenseFeatureCode_t;
typedef struct nvmlGridLicenseExpiry_st {
    unsigned int year;
    unsigned short month, day, hour, min, sec;
    unsigned char status;
} nvmlGridLicenseExpiry_t;
typedef struct nvmlGridLicensableFeature_st {
    nvmlGridLicenseFeatureCode_t featureCode;
    unsigned int featureState; /* non-zero: licensed */
    char licenseInfo[NVML_GRID_LICENSE_BUFFER_SIZE];
    char productName[NVML_GRID_LICENSE_BUFFER_SIZE];
    unsigned int featureEnabled;
    nvmlGridLicenseExpiry_t licenseExpiry;
} nvmlGridLicensableFeature_t;
typedef struct nvmlGridLicensableFeatures_st {
    int isGridLicenseSupported; /* zero outside a vGPU guest */
    unsigned int licensableFeaturesCount;
    nvmlGridLicensableFeature_t gridLicensableFeatures[NVML_GRID_LICENSE_FEATURE_MAX_COUNT];
} nvmlGridLicensableFeatures_t;

/* nvmlDeviceGet/SetComputeMode */
typedef enum nvmlComputeMode_enum {
    NVML_COMPUTEMODE_DEFAULT = 0,
    NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1, /* deprecated */
    NVML_COMPUTEMODE_PROHIBITED = 2,
    NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
} nvmlComputeMode_t;

/* nvmlDeviceGetGpuFabricInfo(V): a GPU's place on an NVLink fabric (multi-node NVLink). */
#define NVML_GPU_FABRIC_UUID_LEN 16
typedef unsigned char nvmlGpuFabricState_t;
#define NVML_GPU_FABRIC_STATE_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_STATE_NOT_STARTED 1
#define NVML_GPU_FABRIC_STATE_IN_PROGRESS 2
#define NVML_GPU_FABRIC_STATE_COMPLETED 3
typedef struct {
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status;
    unsigned int cliqueId;
    nvmlGpuFabricState_t state;
} nvmlGpuFabricInfo_t;
typedef struct {
    unsigned int version; /* nvmlGpuFabricInfo_v2 */
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status;
    unsigned int cliqueId;
    nvmlGpuFabricState_t state;
    unsigned int healthMask;
} nvmlGpuFabricInfoV_t;
#define nvmlGpuFabricInfo_v2 (unsigned int)(sizeof(nvmlGpuFabricInfoV_t) | (2u << 24))

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(nvmlGpuFabricInfo_t) == 28, "nvmlGpuFabricInfo_t layout");
_Static_assert(sizeof(nvmlGpuFabricInfoV_t) == 36, "nvmlGpuFabricInfoV_t layout");
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t layout");
_Static_assert(sizeof(nvmlDeviceAttributes_t) == 40, "nvmlDeviceAttributes_t layout");
_Static_assert(offsetof(nvmlDeviceAttributes_t, memorySizeMB) == 32,
               "nvmlDeviceAttributes_t layout");
_Static_assert(offsetof(nvmlPciInfo_t, pciDeviceId) == 28, "nvmlPciInfo_t layout");
_Static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t layout");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t layout");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t layout");
_Static_assert(nvmlMemory_v2 == 0x02000028, "nvmlMemory_v2 version");
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t layout");
_Static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t layout");
_Static_assert(offsetof(nvmlFieldValue_t, value) == 32, "nvmlFieldValue_t layout");
_Static_assert(sizeof(nvmlGridLicenseExpiry_t) == 16, "nvmlGridLicenseExpiry_t layout");
_Static_assert(sizeof(nvmlGridLicensableFeature_t) == 284, "nvmlGridLicensableFeature_t layout");
_Static_assert(sizeof(nvmlGridLicensableFeatures_t) == 860, "nvmlGridLicensableFeatures_t");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t layout");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t layout");
_Static_assert(offsetof(nvmlProcessInfo_t, gpuInstanceId) == 16, "nvmlProcessInfo_t layout");
_Static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t layout");
_Static_assert(offsetof(nvmlEventData_t, gpuInstanceId) == 24, "nvmlEventData_t layout");
_Static_assert(sizeof(nvmlGpuInstancePlacement_t) == 8, "placement layout");
_Static_assert(sizeof(nvmlGpuInstanceProfileInfo_t) == 48, "GI profile info layout");
_Static_assert(offsetof(nvmlGpuInstanceProfileInfo_t, memorySizeMB) == 40, "GI info layout");
_Static_assert(sizeof(nvmlGpuInstanceProfileInfo_v2_t) == 152, "GI profile info v2 layout");
_Static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, memorySizeMB) == 48, "v2 layout");
_Static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, name) == 56, "v2 layout");
_Static_assert(nvmlGpuInstanceProfileInfo_v2 == 0x02000098, "GI info v2 version");
_Static_assert(sizeof(nvmlGpuInstanceProfileInfo_v3_t) == 152, "GI profile info v3 layout");
_Static_assert(offsetof(nvmlGpuInstanceProfileInfo_v3_t, memorySizeMB) == 40, "v3 layout");
_Static_assert(offsetof(nvmlGpuInstanceProfileInfo_v3_t, capabilities) == 144, "v3 layout");
_Static_assert(nvmlGpuInstanceProfileInfo_v3 == 0x03000098, "GI info v3 version");
_Static_assert(sizeof(nvmlGpuInstanceInfo_t) == 24, "nvmlGpuInstanceInfo_t layout");
_Static_assert(sizeof(nvmlComputeInstancePlacement_t) == 8, "CI placement layout");
_Static_assert(sizeof(nvmlComputeInstanceProfileInfo_t) == 36, "CI profile info layout");
_Static_assert(sizeof(nvmlComputeInstanceProfileInfo_v2_t) == 136, "CI info v2 layout");
_Static_assert(offsetof(nvmlComputeInstanceProfileInfo_v2_t, name) == 40, "CI v2 layout");
_Static_assert(nvmlComputeInstanceProfileInfo_v2 == 0x02000088, "CI info v2 version");
_Static_assert(sizeof(nvmlComputeInstanceProfileInfo_v3_t) == 140, "CI info v3 layout");
_Static_assert(nvmlComputeInstanceProfileInfo_v3 == 0x0300008C, "CI info v3 version");
_Static_assert(sizeof(nvmlComputeInstanceInfo_t) == 32, "nvmlComputeInstanceInfo_t layout");
_Static_assert(offsetof(nvmlComputeInstanceInfo_t, placement) == 24, "CI info layout");
#endif

/* ---- functions ----------------------------------------------------------------------------
 * NVML_FUNCS(X) lists every function as X(name, return type, (parameter list)). It expands
 * to the prototypes and to `<name>_fn` pointer typedefs for the dlsym loader; users may
 * expand it themselves (e.g. to build a symbol table). */

#define NVML_FUNCS(X)                                                                              \
    X(nvmlInit_v2, nvmlReturn_t, (void))                                                           \
    X(nvmlInitWithFlags, nvmlReturn_t, (unsigned int flags))                                       \
    X(nvmlShutdown, nvmlReturn_t, (void))                                                          \
    X(nvmlErrorString, const char *, (nvmlReturn_t result))                                        \
    X(nvmlSystemGetDriverVersion, nvmlReturn_t, (char *version, unsigned int length))              \
    X(nvmlSystemGetCudaDriverVersion, nvmlReturn_t, (int *cudaDriverVersion))                      \
    X(nvmlSystemGetCudaDriverVersion_v2, nvmlReturn_t, (int *cudaDriverVersion))                   \
    X(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int *deviceCount))                            \
    X(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int index, nvmlDevice_t *device))     \
    X(nvmlDeviceGetHandleByUUID, nvmlReturn_t, (const char *uuid, nvmlDevice_t *device))           \
    X(nvmlDeviceGetUUID, nvmlReturn_t, (nvmlDevice_t device, char *uuid, unsigned int length))     \
    X(nvmlDeviceGetName, nvmlReturn_t, (nvmlDevice_t device, char *name, unsigned int length))     \
    X(nvmlDeviceGetIndex, nvmlReturn_t, (nvmlDevice_t device, unsigned int *index))                \
    X(nvmlDeviceGetMinorNumber, nvmlReturn_t, (nvmlDevice_t device, unsigned int *minorNumber))    \
    X(nvmlDeviceGetMemoryInfo, nvmlReturn_t, (nvmlDevice_t device, nvmlMemory_t * memory))         \
    X(nvmlDeviceGetMemoryInfo_v2, nvmlReturn_t, (nvmlDevice_t device, nvmlMemory_v2_t * memory))   \
    X(nvmlDeviceGetCudaComputeCapability, nvmlReturn_t,                                            \
      (nvmlDevice_t device, int *major, int *minor))                                               \
    X(nvmlDeviceGetArchitecture, nvmlReturn_t,                                                     \
      (nvmlDevice_t device, nvmlDeviceArchitecture_t * arch))                                      \
    X(nvmlDeviceGetBrand, nvmlReturn_t, (nvmlDevice_t device, nvmlBrandType_t * type))             \
    X(nvmlDeviceGetPciInfo_v3, nvmlReturn_t, (nvmlDevice_t device, nvmlPciInfo_t * pci))           \
    X(nvmlDeviceGetNumaNodeId, nvmlReturn_t, (nvmlDevice_t device, unsigned int *node))            \
    X(nvmlDeviceGetTopologyCommonAncestor, nvmlReturn_t,                                           \
      (nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuTopologyLevel_t * pathInfo))             \
    X(nvmlDeviceGetNvLinkState, nvmlReturn_t,                                                      \
      (nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive))                       \
    X(nvmlDeviceGetNvLinkRemotePciInfo_v2, nvmlReturn_t,                                           \
      (nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci))                                \
    X(nvmlDeviceGetMigMode, nvmlReturn_t,                                                          \
      (nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode))                 \
    X(nvmlDeviceSetMigMode, nvmlReturn_t,                                                          \
      (nvmlDevice_t device, unsigned int mode, nvmlReturn_t *activationStatus))                    \
    X(nvmlDeviceIsMigDeviceHandle, nvmlReturn_t, (nvmlDevice_t device, unsigned int *isMigDevice)) \
    X(nvmlDeviceGetMaxMigDeviceCount, nvmlReturn_t, (nvmlDevice_t device, unsigned int *count))    \
    X(nvmlDeviceGetMigDeviceHandleByIndex, nvmlReturn_t,                                           \
      (nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice))                          \
    X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, nvmlReturn_t,                                  \
      (nvmlDevice_t migDevice, nvmlDevice_t * device))                                             \
    X(nvmlDeviceGetGpuInstanceId, nvmlReturn_t, (nvmlDevice_t device, unsigned int *id))           \
    X(nvmlDeviceGetComputeInstanceId, nvmlReturn_t, (nvmlDevice_t device, unsigned int *id))       \
    X(nvmlDeviceGetGpuInstanceProfileInfo, nvmlReturn_t,                                           \
      (nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_t *info))             \
    X(nvmlDeviceGetGpuInstanceProfileInfoV, nvmlReturn_t,                                          \
      (nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_v2_t *info))          \
    X(nvmlDeviceGetGpuInstanceProfileInfoByIdV, nvmlReturn_t,                                      \
      (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstanceProfileInfo_v2_t *info))        \
    X(nvmlDeviceGetGpuInstancePossiblePlacements_v2, nvmlReturn_t,                                 \
      (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstancePlacement_t *placements,        \
       unsigned int *count))                                                                       \
    X(nvmlDeviceGetGpuInstanceRemainingCapacity, nvmlReturn_t,                                     \
      (nvmlDevice_t device, unsigned int profileId, unsigned int *count))                          \
    X(nvmlDeviceCreateGpuInstance, nvmlReturn_t,                                                   \
      (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstance_t *gpuInstance))               \
    X(nvmlDeviceCreateGpuInstanceWithPlacement, nvmlReturn_t,                                      \
      (nvmlDevice_t device, unsigned int profileId, const nvmlGpuInstancePlacement_t *placement,   \
       nvmlGpuInstance_t *gpuInstance))                                                            \
    X(nvmlDeviceGetGpuInstances, nvmlReturn_t,                                                     \
      (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstance_t *gpuInstances,               \
       unsigned int *count))                                                                       \
    X(nvmlDeviceGetGpuInstanceById, nvmlReturn_t,                                                  \
      (nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gpuInstance))                      \
    X(nvmlGpuInstanceGetInfo, nvmlReturn_t,                                                        \
      (nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t * info))                               \
    X(nvmlGpuInstanceDestroy, nvmlReturn_t, (nvmlGpuInstance_t gpuInstance))                       \
    X(nvmlGpuInstanceGetComputeInstanceProfileInfo, nvmlReturn_t,                                  \
      (nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,               \
       nvmlComputeInstanceProfileInfo_t *info))                                                    \
    X(nvmlGpuInstanceGetComputeInstanceProfileInfoV, nvmlReturn_t,                                 \
      (nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,               \
       nvmlComputeInstanceProfileInfo_v2_t *info))                                                 \
    X(nvmlGpuInstanceGetComputeInstanceRemainingCapacity, nvmlReturn_t,                            \
      (nvmlGpuInstance_t gpuInstance, unsigned int profileId, unsigned int *count))                \
    X(nvmlGpuInstanceGetComputeInstancePossiblePlacements, nvmlReturn_t,                           \
      (nvmlGpuInstance_t gpuInstance, unsigned int profileId,                                      \
       nvmlComputeInstancePlacement_t *placements, unsigned int *count))                           \
    X(nvmlGpuInstanceCreateComputeInstance, nvmlReturn_t,                                          \
      (nvmlGpuInstance_t gpuInstance, unsigned int profileId,                                      \
       nvmlComputeInstance_t *computeInstance))                                                    \
    X(nvmlGpuInstanceCreateComputeInstanceWithPlacement, nvmlReturn_t,                             \
      (nvmlGpuInstance_t gpuInstance, unsigned int profileId,                                      \
       const nvmlComputeInstancePlacement_t *placement, nvmlComputeInstance_t *computeInstance))   \
    X(nvmlGpuInstanceGetComputeInstances, nvmlReturn_t,                                            \
      (nvmlGpuInstance_t gpuInstance, unsigned int profileId,                                      \
       nvmlComputeInstance_t *computeInstances, unsigned int *count))                              \
    X(nvmlGpuInstanceGetComputeInstanceById, nvmlReturn_t,                                         \
      (nvmlGpuInstance_t gpuInstance, unsigned int id, nvmlComputeInstance_t *computeInstance))    \
    X(nvmlComputeInstanceGetInfo_v2, nvmlReturn_t,                                                 \
      (nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_t * info))                   \
    X(nvmlComputeInstanceDestroy, nvmlReturn_t, (nvmlComputeInstance_t computeInstance))           \
    X(nvmlEventSetCreate, nvmlReturn_t, (nvmlEventSet_t * set))                                    \
    X(nvmlDeviceRegisterEvents, nvmlReturn_t,                                                      \
      (nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set))                    \
    X(nvmlDeviceGetSupportedEventTypes, nvmlReturn_t,                                              \
      (nvmlDevice_t device, unsigned long long *eventTypes))                                       \
    X(nvmlEventSetWait_v2, nvmlReturn_t,                                                           \
      (nvmlEventSet_t set, nvmlEventData_t * data, unsigned int timeoutms))                        \
    X(nvmlEventSetFree, nvmlReturn_t, (nvmlEventSet_t set))                                        \
    X(nvmlDeviceGetComputeRunningProcesses_v3, nvmlReturn_t,                                       \
      (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos))                    \
    X(nvmlDeviceGetUtilizationRates, nvmlReturn_t,                                                 \
      (nvmlDevice_t device, nvmlUtilization_t * utilization))                                      \
    X(nvmlDeviceGetTemperature, nvmlReturn_t,                                                      \
      (nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp))              \
    X(nvmlDeviceGetPowerUsage, nvmlReturn_t, (nvmlDevice_t device, unsigned int *power))           \
    X(nvmlDeviceGetAttributes_v2, nvmlReturn_t,                                                    \
      (nvmlDevice_t device, nvmlDeviceAttributes_t * attributes))                                  \
    X(nvmlDeviceGetAttributes, nvmlReturn_t,                                                       \
      (nvmlDevice_t device, nvmlDeviceAttributes_t * attributes))                                  \
    X(nvmlDeviceGetGpuFabricInfo, nvmlReturn_t,                                                    \
      (nvmlDevice_t device, nvmlGpuFabricInfo_t * gpuFabricInfo))                                  \
    X(nvmlDeviceGetGpuFabricInfoV, nvmlReturn_t,                                                   \
      (nvmlDevice_t device, nvmlGpuFabricInfoV_t * gpuFabricInfo))                                 \
    X(nvmlDeviceGetComputeMode, nvmlReturn_t, (nvmlDevice_t device, nvmlComputeMode_t * mode))     \
    X(nvmlDeviceSetComputeMode, nvmlReturn_t, (nvmlDevice_t device, nvmlComputeMode_t mode))       \
    X(nvmlDeviceGetClockInfo, nvmlReturn_t,                                                        \
      (nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock))                            \
    X(nvmlDeviceGetTotalEccErrors, nvmlReturn_t,                                                   \
      (nvmlDevice_t device, nvmlMemoryErrorType_t errorType, nvmlEccCounterType_t counterType,     \
       unsigned long long *eccCounts))                                                             \
    X(nvmlDeviceGetProcessUtilization, nvmlReturn_t,                                               \
      (nvmlDevice_t device, nvmlProcessUtilizationSample_t * utilization,                          \
       unsigned int *processSamplesCount, unsigned long long lastSeenTimeStamp))                   \
    X(nvmlDeviceGetEncoderUtilization, nvmlReturn_t,                                               \
      (nvmlDevice_t device, unsigned int *utilization, unsigned int *samplingPeriodUs))            \
    X(nvmlDeviceGetDecoderUtilization, nvmlReturn_t,                                               \
      (nvmlDevice_t device, unsigned int *utilization, unsigned int *samplingPeriodUs))            \
    X(nvmlDeviceGetTotalEnergyConsumption, nvmlReturn_t,                                           \
      (nvmlDevice_t device, unsigned long long *energy))                                           \
    X(nvmlDeviceGetPcieReplayCounter, nvmlReturn_t, (nvmlDevice_t device, unsigned int *value))    \
    X(nvmlDeviceGetRemappedRows, nvmlReturn_t,                                                     \
      (nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows,                         \
       unsigned int *isPending, unsigned int *failureOccurred))                                    \
    X(nvmlDeviceGetFieldValues, nvmlReturn_t,                                                      \
      (nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values))                            \
    X(nvmlDeviceGetGridLicensableFeatures_v4, nvmlReturn_t,                                        \
      (nvmlDevice_t device, nvmlGridLicensableFeatures_t * pGridLicensableFeatures))

#define NVML_DECLARE_PROTO(name, ret, params) NVML_EXPORT ret name params;
#define NVML_DECLARE_FN_TYPE(name, ret, params) typedef ret(*name##_fn) params;

NVML_FUNCS(NVML_DECLARE_PROTO)
NVML_FUNCS(NVML_DECLARE_FN_TYPE)

#ifdef __cplusplus
}
#endif

#endif /* GS_GPU_NVML_H */
