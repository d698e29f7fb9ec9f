# Pinned tool versions: the one place to bump them.
#
# Go tools are installed with `go install <pkg>@<version>` into .tools/bin.
# buf and protoc-gen-es come from npm (root package.json + package-lock.json pin the same
# versions exactly; `make setup` fails if the two disagree). Python packages are locked in
# requirements-dev.txt (direct picks in tools/requirements-dev.in, see `make lock`).

PYTHON                     ?= python3
PIP_VERSION                := 26.3

BUF_VERSION                := 1.75.0
PROTOC_GEN_ES_VERSION      := 2.17.0

PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
GRPCURL_VERSION            := v1.9.4
