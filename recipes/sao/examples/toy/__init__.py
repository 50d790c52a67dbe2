"""The toy task `reef demo sao` trains on: small sums with a checkable answer, on the embedded model."""
