# karpy operator image. Not built in karpy's CI (no container engine there): see docs/operator.md.
#   docker build -t karpy:0.1.0 . && kind load docker-image karpy:0.1.0
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /install /usr/local
# A fixed non-root user; the Deployment also sets runAsNonRoot and a read-only root filesystem
# (nothing is written outside the /tmp emptyDir).
RUN groupadd --gid 65532 karpy && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin karpy
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["karpy"]
CMD ["operator", "--provider=kwok", "--leader-elect"]
