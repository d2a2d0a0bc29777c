# countersign: a static binary on a distroless base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/countersign ./cmd/countersign

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/countersign /usr/local/bin/countersign
EXPOSE 8080
ENV COUNTERSIGN_LISTEN=0.0.0.0:8080
ENTRYPOINT ["/usr/local/bin/countersign"]
CMD ["serve"]
