# countersign: a static binary on a distroless base, running as nonroot.
#
#   docker build -t countersign --build-arg COMMIT=$(git rev-parse HEAD) .
#
# .git stays out of the build context, so the commit that
# `countersign --version` names comes from the COMMIT build argument.
#
# Images are pinned by version tag; pin them by digest too where your
# registry policy asks for it (docker buildx imagetools inspect IMAGE).
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG COMMIT=""
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.commit=${COMMIT}" -o /out/countersign ./cmd/countersign

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/countersign /usr/local/bin/countersign
USER nonroot:nonroot
EXPOSE 8080
# Inside a container the service must listen on every interface; set
# COUNTERSIGN_PUBLIC_URL to the URL people open (it warns at start when
# unset, since links would then name the container's own address).
ENV COUNTERSIGN_LISTEN=0.0.0.0:8080
HEALTHCHECK --interval=10s --timeout=4s --start-period=15s --retries=3 \
  CMD ["/usr/local/bin/countersign", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/countersign"]
CMD ["serve"]
