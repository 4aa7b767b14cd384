// The C API of the v-collectives, the prefix reductions and the reduction
// operators a communicator makes (vigilRedOpCreatePreMulSum).

#include "api/handles.hpp"
#include "api/submit.hpp"
#include "vigil/vigil.h"

using namespace vigil;
using api::submit;

extern "C" {

vigilResult_t vigilAllGatherV(const void* sendbuff, size_t sendcount, void* recvbuff, const size_t* recvcounts,
                              const size_t* rdispls, vigilDataType_t datatype, vigilComm_t comm, vigilStream_t stream) {
  return submit(comm, stream,
                OpDesc{.kind = OpKind::AllGatherV,
                       .send = sendbuff,
                       .recv = recvbuff,
                       .count = sendcount,
                       .dtype = datatype,
                       .recvcounts = recvcounts,
                       .rdispls = rdispls});
}

vigilResult_t vigilGatherV(const void* sendbuff, size_t sendcount, void* recvbuff, const size_t* recvcounts,
                           const size_t* rdispls, vigilDataType_t datatype, int root, vigilComm_t comm,
                           vigilStream_t stream) {
  return submit(comm, stream,
                OpDesc{.kind = OpKind::GatherV,
                       .send = sendbuff,
                       .recv = recvbuff,
                       .count = sendcount,
                       .dtype = datatype,
                       .root = root,
                       .recvcounts = recvcounts,
                       .rdispls = rdispls});
}

vigilResult_t vigilScatterV(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                            size_t recvcount, vigilDataType_t datatype, int root, vigilComm_t comm,
                            vigilStream_t stream) {
  return submit(comm, stream,
                OpDesc{.kind = OpKind::ScatterV,
                       .send = sendbuff,
                       .recv = recvbuff,
                       .count = recvcount,
                       .dtype = datatype,
                       .root = root,
                       .sendcounts = sendcounts,
                       .sdispls = sdispls});
}

vigilResult_t vigilReduceScatterV(const void* sendbuff, void* recvbuff, const size_t* recvcounts,
                                  vigilDataType_t datatype, vigilRedOp_t op, vigilComm_t comm, vigilStream_t stream) {
  return submit(comm, stream,
                OpDesc{.kind = OpKind::ReduceScatterV,
                       .send = sendbuff,
                       .recv = recvbuff,
                       .dtype = datatype,
                       .redop = op,
                       .recvcounts = recvcounts});
}

vigilResult_t vigilScan(const void* sendbuff, void* recvbuff, size_t count, vigilDataType_t datatype, vigilRedOp_t op,
                        vigilComm_t comm, vigilStream_t stream) {
  return submit(
      comm, stream,
      OpDesc{.kind = OpKind::Scan, .send = sendbuff, .recv = recvbuff, .count = count, .dtype = datatype, .redop = op});
}

vigilResult_t vigilExscan(const void* sendbuff, void* recvbuff, size_t count, vigilDataType_t datatype, vigilRedOp_t op,
                          vigilComm_t comm, vigilStream_t stream) {
  return submit(
      comm, stream,
      OpDesc{
          .kind = OpKind::Exscan, .send = sendbuff, .recv = recvbuff, .count = count, .dtype = datatype, .redop = op});
}

vigilResult_t vigilRedOpCreatePreMulSum(vigilRedOp_t* op, void* scalar, vigilDataType_t datatype,
                                        vigilScalarResidence_t residence, vigilComm_t comm) {
  return api::guarded(comm, [&] {
    std::shared_ptr<Communicator> c = api::acquire(comm);
    if (op == nullptr) c->error(Errc::ApiNullArgument).op("vigilRedOpCreatePreMulSum").cause("op is NULL").raise();
    *op = c->createPreMulSum(scalar, datatype, residence);
  });
}

vigilResult_t vigilRedOpDestroy(vigilRedOp_t op, vigilComm_t comm) {
  return api::guarded(comm, [&] { api::acquire(comm)->destroyRedOp(op); });
}

}  // extern "C"
