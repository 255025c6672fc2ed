# karpy operator image, reproducible: the base image is pinned to a Python patch release and every
# dependency comes from requirements.lock with its hashes (`make lock` refreshes it); karpy itself
# is built offline from this tree with the locked setuptools. `make image` builds it where a
# container engine runs (it was not built on karpy's development machine: no engine runs there;
# see docs/operator.md).
#   make image && kind load docker-image karpy:0.1.0
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/karpy
COPY requirements.lock /tmp/requirements.lock
RUN /opt/karpy/bin/pip install --require-hashes --no-deps -r /tmp/requirements.lock
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN /opt/karpy/bin/pip install --no-deps --no-build-isolation . \
    && /opt/karpy/bin/pip check \
    && /opt/karpy/bin/karpy version

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/karpy/bin:$PATH
COPY --from=build /opt/karpy /opt/karpy
# A fixed non-root user; the Deployment also sets runAsNonRoot and a read-only root filesystem
# (nothing is written outside the /tmp emptyDir).
RUN groupadd --gid 65532 karpy && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin karpy
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["karpy"]
CMD ["operator", "--provider=kwok", "--leader-elect"]
