"""AgentInterSAC and AgentInterAC (SharedEncoder): ModSAC and DDPG whose actor and critic share one state encoder,
trained by the critic's loss alone; on images the encoder is the actor's ImageEncoder."""
import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from AgentNet import ActorEncoded, ActorSAC, ActorSACEncoded, CriticEncoded, CriticTwinEncoded, ImageEncoder
from AgentRun import Arguments, train_and_evaluate
from AgentZoo import AgentInterAC, AgentInterSAC, ReplayBuffer


def filled_buffer(agent, size=256):
    buffer = ReplayBuffer(size, agent.state_dim, agent.action_dim, if_discrete=False, device=agent.device)
    buffer.extend(torch.randn(size, 3), torch.rand(size, 1) * 2 - 1, torch.randn(size), torch.full((size,), 0.99),
                  torch.randn(size, 3))
    return buffer


def snapshot(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def changed(module: torch.nn.Module, before: list[torch.Tensor]) -> bool:
    return any(not torch.equal(p, b) for p, b in zip(module.parameters(), before, strict=True))


def test_a_critic_of_its_own_has_an_encoder_shaped_as_the_actors_first_layer():
    encoder, first_layer = CriticTwinEncoded(32, 3, 1).encoder, ActorSAC(32, 3, 1).net[:2]
    shapes = lambda net: {name: tensor.shape for name, tensor in net.state_dict().items()}
    assert shapes(encoder) == shapes(first_layer)


def test_the_critic_encodes_states_with_the_actors_first_layer_and_its_target_with_a_copy():
    agent = AgentInterSAC(32, 3, 1, device="cpu")
    assert agent.cri.encoder[0] is agent.act.net[0]
    assert agent.cri_target.encoder[0] is not agent.act.net[0]
    assert torch.equal(agent.cri_target.encoder[0].weight, agent.act.net[0].weight)
    encoder = set(map(id, agent.act.net[0].parameters()))
    assert encoder <= {id(p) for group in agent.cri_optimizer.param_groups for p in group["params"]}
    assert not encoder & {id(p) for group in agent.act_optimizer.param_groups for p in group["params"]}


def test_the_two_q_estimates_share_only_the_encoder():
    """As ModSAC's (tests/test_modsac.py): two heads on one trunk erred together and diverged on Ant-v5 (mean Q 375
    at 49k steps with returns below zero, History/UPDATE_LOG.md, 2026-11-28); only the shared encoder moves both."""
    agent = AgentInterSAC(32, 3, 1, device="cpu")
    state, action = torch.randn(8, 3), torch.rand(8, 1) * 2 - 1
    q1, q2 = agent.cri.get_q_heads(state, action)
    encoder = {id(p) for p in agent.cri.encoder.parameters()}
    params = [p for p in agent.cri.parameters() if id(p) not in encoder]
    grads_1 = torch.autograd.grad(q1.sum(), params, retain_graph=True, allow_unused=True)
    grads_2 = torch.autograd.grad(q2.sum(), params, allow_unused=True)
    assert not any(g1 is not None and g2 is not None for g1, g2 in zip(grads_1, grads_2))
    assert not torch.equal(q1, q2) and torch.equal(agent.cri(state, action), q1)  # the actor follows q1


def test_the_critic_steps_the_encoder_and_the_actor_steps_only_its_own_layers():
    """Two copies update on the same batch, one with an actor step after its critic step: the encoder and the critic
    end the same in both, the actor's own layers differ."""
    torch.manual_seed(0)
    critic_only = AgentInterSAC(32, 3, 1, device="cpu")
    buffer = filled_buffer(critic_only)
    both = copy.deepcopy(critic_only)
    critic_only.actor_share[1], both.actor_share[1] = -1e9, 1e9  # actor steps owed: none, and one at once
    encoder = snapshot(critic_only.act.net[:2])
    for agent in (critic_only, both):
        torch.manual_seed(1)
        buffer.add_size = 1
        agent.update_net(buffer, batch_size=64, replay_ratio=1.0)
    assert changed(critic_only.act.net[:2], encoder)
    assert not changed(both.cri, snapshot(critic_only.cri))  # the encoder is part of both critics
    assert changed(both.act.net[2:], snapshot(critic_only.act.net[2:]))
    assert all(p.requires_grad for p in both.cri.parameters())  # the actor step's freeze is lifted, encoder too


def test_a_resumed_agent_keeps_one_encoder_with_the_saved_weights(tmp_path):
    torch.manual_seed(0)
    agent = AgentInterSAC(32, 3, 1, device="cpu")
    buffer = filled_buffer(agent)
    buffer.add_size = 32
    agent.update_net(buffer, batch_size=64, replay_ratio=1.0)
    agent.save_or_load_agent(str(tmp_path), if_save=True)
    resumed = AgentInterSAC(32, 3, 1, device="cpu")
    resumed.save_or_load_agent(str(tmp_path), if_save=False)
    assert resumed.cri.encoder[0] is resumed.act.net[0]
    for mine, theirs in ((resumed.act, agent.act), (resumed.cri, agent.cri), (resumed.cri_target, agent.cri_target)):
        assert all(torch.equal(p, q) for p, q in zip(mine.parameters(), theirs.parameters(), strict=True))


def test_interac_shares_the_actors_first_layer_and_the_critic_alone_trains_it():
    agent = AgentInterAC(32, 3, 1, device="cpu")
    assert type(agent.cri) is CriticEncoded and len(agent.cri.get_q_heads(torch.zeros(2, 3), torch.zeros(2, 1))) == 1
    assert agent.cri.encoder[0] is agent.act.net[0] and agent.cri_target.encoder[0] is not agent.act.net[0]
    assert agent.act_target.net[0] is not agent.act.net[0]
    encoder = set(map(id, agent.act.net[0].parameters()))
    assert encoder <= {id(p) for group in agent.cri_optimizer.param_groups for p in group["params"]}
    assert not encoder & {id(p) for group in agent.act_optimizer.param_groups for p in group["params"]}
    own_layers = {id(p) for p in agent.act.net[2:].parameters()}
    assert own_layers == {id(p) for group in agent.act_optimizer.param_groups for p in group["params"]}


@pytest.mark.parametrize("agent_class, actor_class", [(AgentInterAC, ActorEncoded), (AgentInterSAC, ActorSACEncoded)])
@pytest.mark.parametrize("shape", [(4, 84, 84), (96, 96, 3), (10, 10, 4)])
def test_on_images_the_shared_encoder_is_the_actors_image_encoder(agent_class, actor_class, shape):
    agent = agent_class(32, shape, 2, device="cpu")
    assert agent_class.act_class is actor_class  # the actors that take images (AgentNet.state_mlp)
    assert isinstance(agent.act.net[0], ImageEncoder) and agent.cri.encoder[0] is agent.act.net[0]
    encoder = set(map(id, agent.act.net[0].parameters()))
    assert not encoder & {id(p) for group in agent.act_optimizer.param_groups for p in group["params"]}
    states = torch.zeros((5, *shape), dtype=torch.uint8)
    action = agent.explore_action(states)  # its noise has the batch's shape, not the image's
    assert action.shape == (5, 2) and agent.cri(states, action).shape == (5,)
    own = CriticEncoded(32, shape, 2)  # a critic alone keeps an encoder shaped as the actor's
    shapes = lambda net: {name: tensor.shape for name, tensor in net.state_dict().items()}
    assert shapes(own.encoder) == shapes(actor_class(32, shape, 2).net[:1])


class ImageSideEnv(gym.Env):
    """One step an episode: the image's lit column is left or right, and the action (one number in [-1, 1]) pays its
    value towards that side; only a policy that reads the image earns 1 every episode (a blind one, 0 on average)."""

    observation_space = gym.spaces.Box(0, 1, (10, 10, 1), np.bool_)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.side = int(self.np_random.integers(2))
        image = np.zeros((10, 10, 1), np.bool_)
        image[:, 2 + 5 * self.side] = True
        return image, {}

    def step(self, action):
        return np.zeros((10, 10, 1), np.bool_), float(action[0]) * (2 * self.side - 1), True, False, {}


@pytest.mark.parametrize("agent", ["AgentInterAC", "AgentInterSAC"])
@pytest.mark.learning
def test_shared_encoder_agents_learn_from_images(agent, tmp_path):
    """16 evaluation episodes at 0.9 or more: a blind policy gets there with probability below 2^-14."""
    args = Arguments(agent=agent, env=gym.wrappers.TimeLimit(ImageSideEnv(), 1), cwd=str(tmp_path / "run"),
                     break_step=3000, random_steps=256, eval_gap=0, eval_times=16, target_return=0.9,
                     if_multiprocess=False)
    assert train_and_evaluate(args)["if_solved"]
