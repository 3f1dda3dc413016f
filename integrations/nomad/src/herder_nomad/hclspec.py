"""Building the hclspec trees Nomad decodes plugin and task configuration with."""

from __future__ import annotations

from herder_nomad.wire import hcl_spec_pb2


def attr(name: str, type: str, required: bool = False) -> hcl_spec_pb2.Spec:
    """An attribute; ``type`` is an HCL type expression (``string``, ``list(string)``, ``any``)."""
    return hcl_spec_pb2.Spec(Attr=hcl_spec_pb2.Attr(name=name, type=type, required=required))


def obj(attributes: dict[str, hcl_spec_pb2.Spec]) -> hcl_spec_pb2.Spec:
    return hcl_spec_pb2.Spec(object=hcl_spec_pb2.Object(attributes=attributes))
