# layerscope: one image for the API (+ dashboard) and the workers.
#   docker build -t layerscope .                       # torch from PyPI (CUDA-enabled on linux/x86_64)
#   docker build --build-arg EXTRAS=cuda -t layerscope .   # + mamba-ssm / causal-conv1d kernels
#                                                          #   (needs a CUDA toolchain: use a CUDA devel base)
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 1000 layerscope \
    && mkdir -p /store && chown layerscope:layerscope /store

WORKDIR /app
COPY pyproject.toml README.md ./
COPY layerscope_core ./layerscope_core
COPY models_store ./models_store
COPY science ./science
COPY store ./store
COPY worker ./worker
COPY backend ./backend
COPY dashboard ./dashboard
COPY layerscope ./layerscope

ARG EXTRAS=""
RUN pip install ".${EXTRAS:+[$EXTRAS]}"

USER layerscope
ENV LAYERSCOPE_HOME=/home/layerscope/.layerscope \
    LAYERSCOPE_STORE_DIR=/store
VOLUME ["/store"]
EXPOSE 8050

CMD ["layerscope", "serve", "--host", "0.0.0.0", "--port", "8050"]
